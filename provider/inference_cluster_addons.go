package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
)

// eksAddons are the attribute names of the EKS managed add-ons, in
// awsinfra.KnownAddons order, with their EKS names.
var eksAddons = []struct{ attr, name string }{
	{"vpc_cni", "vpc-cni"},
	{"kube_proxy", "kube-proxy"},
	{"pod_identity_agent", "eks-pod-identity-agent"},
	{"coredns", "coredns"},
	{"fsx_csi_driver", "aws-fsx-csi-driver"},
}

type addonModel struct {
	Enabled          types.Bool   `tfsdk:"enabled"`
	Version          types.String `tfsdk:"version"`
	ResolveConflicts types.String `tfsdk:"resolve_conflicts"`
	Status           types.String `tfsdk:"status"`
}

var (
	addonTypes  = map[string]attr.Type{"enabled": types.BoolType, "version": types.StringType, "resolve_conflicts": types.StringType, "status": types.StringType}
	addonType   = types.ObjectType{AttrTypes: addonTypes}
	addonsTypes = func() map[string]attr.Type {
		out := map[string]attr.Type{"nvidia_device_plugin": devicePluginType, "monitoring": monitoringType, "inference_extension": inferenceExtensionType}
		for _, a := range eksAddons {
			out[a.attr] = addonType
		}
		return out
	}()
	addonDefault = types.ObjectValueMust(addonTypes, map[string]attr.Value{"enabled": types.BoolValue(true), "version": types.StringNull(),
		"resolve_conflicts": types.StringValue("OVERWRITE"), "status": types.StringNull()})
)

func addonsAttribute() schema.SingleNestedAttribute {
	defaults := map[string]attr.Value{"nvidia_device_plugin": devicePluginDefault, "monitoring": monitoringDefault,
		"inference_extension": types.ObjectNull(inferenceExtensionTypes)}
	attrs := map[string]schema.Attribute{"nvidia_device_plugin": devicePluginAttribute(), "monitoring": monitoringAttribute(),
		"inference_extension": inferenceExtensionAttribute()}
	for _, a := range eksAddons {
		defaults[a.attr] = addonDefault
		attrs[a.attr] = schema.SingleNestedAttribute{
			Optional: true, Computed: true, Default: objectdefault.StaticValue(addonDefault),
			MarkdownDescription: "The EKS managed add-on `" + a.name + "`.",
			Attributes: map[string]schema.Attribute{
				"enabled": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
					MarkdownDescription: "Install the add-on; default `true`. `false` removes an installed one."},
				"version": schema.StringAttribute{Optional: true, Computed: true,
					MarkdownDescription: "Pinned version, e.g. `v1.19.5-eksbuild.1`. Unset: EKS's default for the cluster's Kubernetes version (DescribeAddonVersions), kept while EKS offers it for that version."},
				"resolve_conflicts": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("OVERWRITE"),
					Validators:          []validator.String{stringvalidator.OneOf("OVERWRITE", "PRESERVE", "NONE")},
					MarkdownDescription: "What EKS does with fields others set on the add-on's objects: `OVERWRITE` (default; also adopts a self-managed install), `PRESERVE` or `NONE`."},
				"status": schema.StringAttribute{Computed: true,
					MarkdownDescription: "Status EKS reports (`ACTIVE`, `DEGRADED`, ...); null when not installed. Anything but `ACTIVE` plans a repair."},
			},
		}
	}
	return schema.SingleNestedAttribute{
		Optional: true, Computed: true, Default: objectdefault.StaticValue(types.ObjectValueMust(addonsTypes, defaults)),
		MarkdownDescription: "Add-ons. EKS managed ones, installed through the EKS API: the networking ones and the pod identity agent before the nodes join, " +
			"CoreDNS and the FSx CSI driver after. The FSx CSI driver's controller gets an IAM role of its own (trusted by `pods.eks.amazonaws.com`, with the AWS managed policy `AmazonFSxFullAccess` the EKS user guide names), " +
			"bound to its service account `kube-system/fsx-csi-controller-sa` through an EKS Pod Identity association, so it needs `pod_identity_agent`; turning the driver off removes both. A version drifted from a pinned one, an add-on deleted or degraded behind Terraform's back, shows in the plan and the apply repairs it. " +
			"In-cluster ones (`nvidia_device_plugin`, `monitoring`, `inference_extension`), applied through the Kubernetes API with the cluster's own endpoint once the node groups are active " +
			"(tokens minted from the provider's AWS credentials, as the fleet does): a deleted or edited object, a release with edited values or stuck in `pending-*`, " +
			"shows in the plan and the apply repairs it; turned off, they are removed; on destroy they go before the node groups and the cluster.",
		Attributes: attrs,
	}
}

// validateAddons refuses the FSx CSI driver without the pod identity agent:
// the driver's controller gets its AWS identity through EKS Pod Identity,
// and without the agent the add-on fails with "Amazon EKS Pod Identity
// agent is not installed in the cluster" (EKS user guide, fsx-csi-create).
// An add-on left out of the configuration is on by default.
func validateAddons(ctx context.Context, obj types.Object, diags *diag.Diagnostics) {
	if obj.IsNull() || obj.IsUnknown() {
		return
	}
	driver, driverKnown := addonEnabled(ctx, obj, "fsx_csi_driver", diags)
	agent, agentKnown := addonEnabled(ctx, obj, "pod_identity_agent", diags)
	if driverKnown && agentKnown && driver && !agent {
		diags.AddAttributeError(path.Root("addons").AtName("pod_identity_agent").AtName("enabled"), "FSx CSI driver needs the pod identity agent",
			"addons.fsx_csi_driver is on, and its controller gets its IAM role through EKS Pod Identity, which addons.pod_identity_agent provides: "+
				"set addons.pod_identity_agent.enabled = true, or addons.fsx_csi_driver.enabled = false")
	}
}

// addonEnabled reports whether a configuration's addons object turns the
// add-on name on (left out, it is on), and whether that is known yet.
func addonEnabled(ctx context.Context, obj types.Object, name string, diags *diag.Diagnostics) (on, known bool) {
	if obj.IsNull() {
		return true, true
	}
	if obj.IsUnknown() {
		return false, false
	}
	v, ok := obj.Attributes()[name].(types.Object)
	if !ok || v.IsNull() {
		return true, true
	}
	if v.IsUnknown() {
		return false, false
	}
	var m addonModel
	diags.Append(v.As(ctx, &m, asObject)...)
	if m.Enabled.IsUnknown() {
		return false, false
	}
	return m.Enabled.IsNull() || m.Enabled.ValueBool(), true
}

// addonSpecs are the enabled add-ons of a plan.
func addonSpecs(ctx context.Context, obj types.Object, diags *diag.Diagnostics) []awsinfra.AddonSpec {
	if obj.IsNull() || obj.IsUnknown() {
		return nil
	}
	var out []awsinfra.AddonSpec
	for _, a := range eksAddons {
		v, ok := obj.Attributes()[a.attr].(types.Object)
		if !ok || v.IsNull() || v.IsUnknown() {
			continue
		}
		var m addonModel
		diags.Append(v.As(ctx, &m, asObject)...)
		if !m.Enabled.ValueBool() {
			continue
		}
		version := ""
		if !m.Version.IsUnknown() {
			version = m.Version.ValueString()
		}
		out = append(out, awsinfra.AddonSpec{Name: a.name, Version: version, ResolveConflicts: m.ResolveConflicts.ValueString()})
	}
	return out
}

// addonsObject is addons as read back: enabled and resolve_conflicts are the
// prior's (EKS does not report a conflict policy), version and status AWS's.
func addonsObject(installed []awsinfra.Addon, prior types.Object) types.Object {
	byName := map[string]awsinfra.Addon{}
	for _, a := range installed {
		byName[a.Name] = a
	}
	v := map[string]attr.Value{}
	for _, a := range eksAddons {
		p := addonDefault.Attributes()
		if !prior.IsNull() && !prior.IsUnknown() {
			if o, ok := prior.Attributes()[a.attr].(types.Object); ok && !o.IsNull() && !o.IsUnknown() {
				p = o.Attributes()
			}
		}
		got, ok := byName[a.name]
		p["version"], p["status"] = types.StringNull(), types.StringNull()
		if ok {
			p["version"], p["status"] = types.StringValue(got.Version), types.StringValue(got.Status)
		}
		if p["enabled"].IsUnknown() {
			p["enabled"] = types.BoolValue(ok)
		}
		v[a.attr] = types.ObjectValueMust(addonTypes, p)
	}
	// The in-cluster add-ons are read from the cluster, not from EKS (readInCluster).
	v["nvidia_device_plugin"], v["monitoring"] = devicePluginDefault, monitoringDefault
	v["inference_extension"] = types.ObjectNull(inferenceExtensionTypes) // off unless set
	if !prior.IsNull() && !prior.IsUnknown() {
		for _, k := range []string{"nvidia_device_plugin", "monitoring", "inference_extension"} {
			if o, ok := prior.Attributes()[k].(types.Object); ok && !o.IsNull() && !o.IsUnknown() {
				v[k] = o
			}
		}
	}
	return types.ObjectValueMust(addonsTypes, v)
}

// planAddons keeps each add-on's version and status from state when
// nothing asks for a change, and leaves them unknown where the apply will
// act: an unpinned add-on after a Kubernetes version change, and one that
// is not ACTIVE (absent, degraded), which the apply repairs.
func planAddons(plan, prior types.Object, versionChanged bool) types.Object {
	if plan.IsNull() || plan.IsUnknown() {
		return plan
	}
	v := plan.Attributes()
	for _, a := range eksAddons {
		po, ok := v[a.attr].(types.Object)
		if !ok || po.IsNull() || po.IsUnknown() {
			continue
		}
		p := po.Attributes()
		var s map[string]attr.Value
		if !prior.IsNull() && !prior.IsUnknown() {
			if so, ok := prior.Attributes()[a.attr].(types.Object); ok && !so.IsNull() && !so.IsUnknown() {
				s = so.Attributes()
			}
		}
		enabled := p["enabled"].(types.Bool).ValueBool()
		active := s != nil && s["status"].Equal(types.StringValue("ACTIVE"))
		switch {
		case !enabled:
			p["status"] = types.StringNull()
			if p["version"].IsUnknown() {
				p["version"] = types.StringNull()
			}
		default:
			p["status"] = types.StringUnknown()
			if active {
				p["status"] = s["status"]
			}
			if p["version"].IsUnknown() && !versionChanged && s != nil && !s["version"].IsNull() {
				p["version"] = s["version"]
			}
		}
		v[a.attr] = types.ObjectValueMust(addonTypes, p)
	}
	return types.ObjectValueMust(addonsTypes, v)
}
