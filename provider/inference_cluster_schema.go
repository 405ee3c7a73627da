package provider

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// nodeGroupDefaults are the product's node groups: eight single-A10G nodes for
// vLLM replicas and one general-purpose node for the router and add-ons.
var (
	// nvidia.com/gpu.present is the label the NVIDIA device plugin's chart
	// schedules on (its affinity otherwise needs Node Feature Discovery).
	gpuDefaults = nodeGroupDefaults{name: "gpu", instanceType: "g5.xlarge", amiType: "AL2023_x86_64_NVIDIA", disk: 200, size: 8, colocate: true,
		labels: map[string]string{"llmd.dev/pool": "gpu", "nvidia.com/gpu.present": "true"}, taints: []taintModel{{Key: types.StringValue("nvidia.com/gpu"), Value: types.StringValue("true"), Effect: types.StringValue("NO_SCHEDULE")}}}
	systemDefaults = nodeGroupDefaults{name: "system", instanceType: "m6i.4xlarge", amiType: "AL2023_x86_64_STANDARD", disk: 100, size: 1,
		labels: map[string]string{"llmd.dev/pool": "system"}}
)

// defaultKubernetesVersion is the version a new cluster gets when none is
// configured. An existing cluster keeps its version from state, so a
// provider release that moves this default never plans an upgrade.
const defaultKubernetesVersion = "1.33"

type nodeGroupDefaults struct {
	name, instanceType, amiType string
	disk, size                  int64
	colocate                    bool
	labels                      map[string]string
	taints                      []taintModel
}

var clusterNamePattern = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*$`)

func (r *inferenceClusterResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := func() []planmodifier.String { return []planmodifier.String{stringplanmodifier.UseStateForUnknown()} }
	resp.Schema = schema.Schema{
		MarkdownDescription: "An EKS cluster ready for LLM inference: its own VPC (or an existing one), IAM roles, the control plane " +
			"with API authentication and an admin access entry, a GPU node group and a system node group, an FSx for Lustre file system for the " +
			"model weights, the EKS managed add-ons, and in the cluster the NVIDIA device plugin and monitoring (kube-prometheus-stack with llmd's Grafana dashboards). Every part carries the tags `llmd.dev/owner = <name>` and `llmd.dev/region`; a create that failed " +
			"half way is saved (tainted) with what it made, so `terraform destroy` removes every part, the next apply replaces it, and " +
			"`terraform untaint` then apply resumes it instead, adopting what exists. Most changes apply in place; a node group change EKS cannot make in place " +
			"replaces that node group only; only `name`, `admin_access` and `networking` replace the whole cluster (see the table below). " +
			"Waits poll AWS every 10s; the environment variable `LLMD_AWS_POLL_INTERVAL` (a Go duration) changes that and exists for tests against emulators.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, PlanModifiers: keep(), MarkdownDescription: "The cluster name."},
			"name": schema.StringAttribute{
				Required:            true,
				MarkdownDescription: "EKS cluster name; also names the IAM roles and tags every part. 1 to 38 characters, a letter first, then letters, digits and hyphens. Changing it replaces the cluster.",
				Validators: []validator.String{stringvalidator.LengthBetween(1, 38),
					stringvalidator.RegexMatches(clusterNamePattern, "must start with a letter and hold only letters, digits and hyphens (it names IAM roles too)")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"kubernetes_version": schema.StringAttribute{
				Optional: true, Computed: true, PlanModifiers: keep(),
				MarkdownDescription: "Kubernetes minor version, e.g. `1.33`. A new cluster without one gets `" + defaultKubernetesVersion + "`; an existing cluster keeps " +
					"its version when this is unset, whatever a later provider release defaults to. Upgrades happen in place (control plane, then node groups), one minor at a time as EKS requires.",
				Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^1\.\d{2}$`), "must be a Kubernetes minor version such as \"1.33\"")},
			},
			"admin_access": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString("access_entry"),
				MarkdownDescription: "How the applying identity becomes cluster admin: `access_entry` (an explicit access entry with AmazonEKSClusterAdminPolicy for the caller, an assumed role resolved to its IAM role) or `bootstrap_creator` (EKS's creator bootstrap). Not both. Changing it replaces the cluster.",
				Validators:          []validator.String{stringvalidator.OneOf("access_entry", "bootstrap_creator")},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"tags": schema.MapAttribute{ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Tags for every part, over the provider's `default_tags`. Keys under `llmd.dev/` are reserved."},
			"image_mirrors": schema.MapAttribute{ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Where every image this product deploys is pulled from: upstream registry host (`docker.io`, `nvcr.io`, `ghcr.io`, `public.ecr.aws`, `quay.io`, `registry.k8s.io`, ...) " +
					"to the repository prefix that mirrors it, e.g. `docker.io = \"123456789012.dkr.ecr.us-east-1.amazonaws.com/docker-hub\"` for an ECR pull-through cache rule with that prefix. " +
					"References are normalised first (`vllm/vllm-openai` is `docker.io/vllm/vllm-openai`, `busybox` is `docker.io/library/busybox`, as the cache expects); repository, tag and digest are kept. " +
					"Applies to the device plugin, and through `kubernetes` to every fleet's vLLM pods and staging Job and every router; images of a registry without an entry are pulled as written. " +
					"Not to the monitoring chart's images (the chart's own) nor the EKS add-ons' (AWS's regional registries). A change rolls those pods to the same images from the new place."},
			"tags_all": schema.MapAttribute{ElementType: types.StringType, Computed: true,
				MarkdownDescription: "Tags on every part: `default_tags` merged with `tags`."},
			"networking":                networkingAttribute(),
			"endpoint_access":           endpointAccessAttribute(),
			"compute":                   computeAttribute(),
			"gpu_node_group":            nodeGroupAttribute("The GPU node group vLLM replicas run on (with `compute.mode = \"karpenter\"`, what Karpenter's GPU nodes are).", gpuDefaults),
			"model_storage":             modelStorageAttribute(),
			"model_bucket":              modelBucketAttribute(),
			"addons":                    addonsAttribute(),
			"access_entries":            accessEntriesAttribute(),
			"system_node_group":         nodeGroupAttribute("The node group for the router and cluster add-ons.", systemDefaults),
			"arn":                       schema.StringAttribute{Computed: true, PlanModifiers: keep(), MarkdownDescription: "ARN of the EKS cluster."},
			"endpoint":                  schema.StringAttribute{Computed: true, PlanModifiers: keep(), MarkdownDescription: "URL of the Kubernetes API server."},
			"cluster_ca_certificate":    schema.StringAttribute{Computed: true, PlanModifiers: keep(), MarkdownDescription: "Base64 PEM of the cluster's certificate authority."},
			"oidc_issuer_url":           schema.StringAttribute{Computed: true, PlanModifiers: keep(), MarkdownDescription: "OIDC issuer URL of the cluster, for IAM roles for service accounts."},
			"cluster_security_group_id": schema.StringAttribute{Computed: true, PlanModifiers: keep(), MarkdownDescription: "Security group EKS created for the control plane and nodes (empty where the API does not report one)."},
			"security_group_ids": schema.SetAttribute{ElementType: types.StringType, Computed: true,
				PlanModifiers:       []planmodifier.Set{setplanmodifier.UseStateForUnknown()},
				MarkdownDescription: "Additional security groups of the control plane's network interfaces."},
			"admin_principal_arn": schema.StringAttribute{Computed: true, PlanModifiers: keep(),
				MarkdownDescription: "IAM principal given the admin access entry (empty with `bootstrap_creator`)."},
			"in_cluster_inventory": schema.ListAttribute{ElementType: types.StringType, Computed: true,
				MarkdownDescription: "The objects the in-cluster add-ons applied (`group/version/Kind/namespace/name`), besides the monitoring Helm release: what turning an add-on off prunes and a destroy deletes."},
			"kubernetes": schema.SingleNestedAttribute{
				Computed:            true,
				PlanModifiers:       []planmodifier.Object{kubernetesFromState{}},
				MarkdownDescription: "How to reach the cluster: pass this object as `cluster` to `llmd_model_fleet` and `llmd_prefix_router`; they mint short-lived EKS tokens themselves.",
				Attributes: map[string]schema.Attribute{
					"name":                   schema.StringAttribute{Computed: true, MarkdownDescription: "EKS cluster name (for the token)."},
					"endpoint":               schema.StringAttribute{Computed: true, MarkdownDescription: "URL of the Kubernetes API server."},
					"cluster_ca_certificate": schema.StringAttribute{Computed: true, MarkdownDescription: "Base64 PEM of the cluster's certificate authority."},
					"region":                 schema.StringAttribute{Computed: true, MarkdownDescription: "AWS region of the cluster (the STS region tokens are minted for)."},
					"gpu_instance_type":      schema.StringAttribute{Computed: true, MarkdownDescription: "Instance type of the GPU node group (sizes the fleet's pods)."},
					"gpu_node_labels": schema.MapAttribute{ElementType: types.StringType, Computed: true,
						MarkdownDescription: "Labels of the GPU nodes (the fleet's node selector)."},
					"gpu_node_taints": schema.ListAttribute{ElementType: types.StringType, Computed: true,
						MarkdownDescription: "Taints of the GPU nodes as `key=value:Effect` (the fleet tolerates them)."},
					"gpu_node_desired_size": schema.Int64Attribute{Computed: true,
						MarkdownDescription: "The most GPU nodes there are: the GPU node group's desired size (no node autoscaler runs), or with `compute.mode = \"karpenter\"` its `max_size`, the NodePool's limit (the fleet's plan refuses more pods than they hold)."},
					"system_node_labels": schema.MapAttribute{ElementType: types.StringType, Computed: true,
						MarkdownDescription: "Labels of the system node group's nodes (`system_node_group.labels`, or `eks.amazonaws.com/nodegroup = <name>`, which EKS puts on every node of a managed node group, when it has none): the node selector of the router and of the staging Job."},
					"system_node_taints": schema.ListAttribute{ElementType: types.StringType, Computed: true,
						MarkdownDescription: "Taints of the system nodes as `key=value:Effect` (the router and the staging Job tolerate them)."},
					"image_mirrors": schema.MapAttribute{ElementType: types.StringType, Computed: true,
						MarkdownDescription: "`image_mirrors`, for the fleet and the router to pull their images through."},
					"system_node_desired_size": schema.Int64Attribute{Computed: true,
						MarkdownDescription: "Desired size of the system node group: with 1, the router's replicas share one node (a plan warning says so)."},
				},
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
		},
	}
	for k, v := range grafanaPasswordAttributes() {
		resp.Schema.Attributes[k] = v
	}
}

func networkingAttribute() schema.SingleNestedAttribute {
	replaceSet := []planmodifier.Set{setplanmodifier.UseStateForUnknown(), setplanmodifier.RequiresReplaceIfConfigured()}
	replaceStr := []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplaceIfConfigured()}
	return schema.SingleNestedAttribute{
		Optional: true, Computed: true,
		PlanModifiers: []planmodifier.Object{objectplanmodifier.UseStateForUnknown()},
		MarkdownDescription: "Where the cluster runs. Omit it (or give `vpc_cidr`/`availability_zones`) to create a VPC with a private and a public subnet per zone, " +
			"an internet gateway and a NAT gateway; or give `vpc_id` and `subnet_ids` of an existing network, which is never modified. Changes replace the cluster.",
		Attributes: map[string]schema.Attribute{
			"vpc_cidr": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: replaceStr,
				MarkdownDescription: "CIDR of the VPC to create, /16 to /24; defaults to `10.0.0.0/16`. Read back for an existing VPC."},
			"availability_zones": schema.SetAttribute{ElementType: types.StringType, Optional: true, Computed: true, PlanModifiers: replaceSet,
				Validators:          []validator.Set{setvalidator.SizeBetween(2, 4)},
				MarkdownDescription: "Zones of the created subnets (2 to 4); defaults to the first three zones offering both instance types. Read back from the subnets for an existing network."},
			"vpc_id": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: replaceStr,
				MarkdownDescription: "ID of an existing VPC to use (with `subnet_ids`); the created VPC's ID otherwise."},
			"subnet_ids": schema.SetAttribute{ElementType: types.StringType, Optional: true, Computed: true, PlanModifiers: replaceSet,
				MarkdownDescription: "Existing subnets (at least two zones) for the control plane and nodes; the created private subnets otherwise."},
			"public_subnet_ids": schema.SetAttribute{ElementType: types.StringType, Computed: true,
				PlanModifiers:       []planmodifier.Set{setplanmodifier.UseStateForUnknown()},
				MarkdownDescription: "The created public subnets (for internet-facing load balancers); empty for an existing network."},
		},
	}
}

func endpointAccessAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true, Computed: true,
		Default: objectdefault.StaticValue(types.ObjectValueMust(endpointAccessTypes, map[string]attr.Value{
			"public": types.BoolValue(true), "private": types.BoolValue(true),
			"public_cidrs": types.SetValueMust(types.StringType, []attr.Value{types.StringValue("0.0.0.0/0")})})),
		MarkdownDescription: "Who reaches the Kubernetes API endpoint. Changes in place.",
		Attributes: map[string]schema.Attribute{
			"public":  schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true), MarkdownDescription: "Public endpoint on; default `true`."},
			"private": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true), MarkdownDescription: "Private endpoint inside the VPC on; default `true`."},
			"public_cidrs": schema.SetAttribute{ElementType: types.StringType, Optional: true, Computed: true,
				Default:             setdefault.StaticValue(types.SetValueMust(types.StringType, []attr.Value{types.StringValue("0.0.0.0/0")})),
				MarkdownDescription: "CIDRs allowed to the public endpoint; default `[\"0.0.0.0/0\"]`."},
		},
	}
}

func nodeGroupAttribute(desc string, d nodeGroupDefaults) schema.SingleNestedAttribute {
	labels := map[string]attr.Value{}
	for k, v := range d.labels {
		labels[k] = types.StringValue(v)
	}
	taints := []attr.Value{}
	for _, t := range d.taints {
		taints = append(taints, types.ObjectValueMust(taintTypes, map[string]attr.Value{"key": t.Key, "value": t.Value, "effect": t.Effect}))
	}
	labelsValue := types.MapValueMust(types.StringType, labels)
	taintsValue := types.SetValueMust(types.ObjectType{AttrTypes: taintTypes}, taints)
	size := types.Int64Value(d.size)
	return schema.SingleNestedAttribute{
		Optional: true, Computed: true,
		Default: objectdefault.StaticValue(types.ObjectValueMust(nodeGroupTypes, map[string]attr.Value{
			"name": types.StringValue(d.name), "instance_type": types.StringValue(d.instanceType), "ami_type": types.StringValue(d.amiType),
			"capacity_type": types.StringValue("ON_DEMAND"), "disk_size": types.Int64Value(d.disk),
			"desired_size": size, "min_size": size, "max_size": size, "labels": labelsValue, "taints": taintsValue,
			"colocate_with_storage": types.BoolValue(d.colocate), "version": types.StringNull(), "release_version": types.StringNull(),
			"capacity_reservation": types.ObjectNull(capacityReservationTypes)})),
		MarkdownDescription: desc + " Scaling, labels, taints and the Kubernetes version change in place; instance type, AMI type, capacity type, disk size " +
			"and `colocate_with_storage` replace this node group alone (its nodes are deleted, then created again under the same name), never the cluster, " +
			"the network or the file system.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Computed: true, Default: stringdefault.StaticString(d.name), MarkdownDescription: "Node group name (`" + d.name + "`)."},
			"instance_type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.instanceType),
				MarkdownDescription: "EC2 instance type; default `" + d.instanceType + "`. Checked at plan time to be offered in the zones."},
			"ami_type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.amiType),
				MarkdownDescription: "EKS AMI type; default `" + d.amiType + "`. For GPUs, `AL2023_x86_64_NVIDIA` (driver, no device plugin: `addons.nvidia_device_plugin` defaults on) " +
					"or `BOTTLEROCKET_x86_64_NVIDIA` (driver and device plugin: `addons.nvidia_device_plugin` defaults off, and turning it on is a plan-time error)."},
			"capacity_type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("ON_DEMAND"),
				Validators:          []validator.String{stringvalidator.OneOf("ON_DEMAND", "SPOT", "CAPACITY_BLOCK")},
				MarkdownDescription: "`ON_DEMAND` (default), `SPOT`, or `CAPACITY_BLOCK` for a node group on a Capacity Block (`capacity_reservation`), as EKS requires."},
			"disk_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(d.disk),
				Validators:          []validator.Int64{int64validator.Between(20, 16384)},
				MarkdownDescription: "Root volume size in GiB."},
			"desired_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(d.size),
				Validators: []validator.Int64{int64validator.AtLeast(0)}, MarkdownDescription: "Desired node count."},
			"min_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(d.size),
				Validators: []validator.Int64{int64validator.AtLeast(0)}, MarkdownDescription: "Minimum node count."},
			"max_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(d.size),
				Validators: []validator.Int64{int64validator.AtLeast(1)}, MarkdownDescription: "Maximum node count; the GPU vCPU quota is checked against it."},
			"labels": schema.MapAttribute{ElementType: types.StringType, Optional: true, Computed: true, Default: mapdefault.StaticValue(labelsValue),
				MarkdownDescription: "Kubernetes labels on the nodes; default " + labelsText(d.labels) + ". Labels set here replace the defaults."},
			"colocate_with_storage": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(d.colocate),
				MarkdownDescription: fmt.Sprintf("Place the nodes in the zone of `model_storage` only (no cross-zone Lustre traffic); default `%t`.", d.colocate)},
			"version": schema.StringAttribute{Computed: true,
				MarkdownDescription: "Kubernetes version of the nodes as EKS reports it. A node group left behind the control plane (an upgrade that stopped half way) shows here and in the plan, and the apply upgrades it."},
			"release_version":      schema.StringAttribute{Computed: true, MarkdownDescription: "AMI release version of the nodes."},
			"capacity_reservation": capacityReservationAttribute(),
			"taints": schema.SetNestedAttribute{
				Optional: true, Computed: true, Default: setdefault.StaticValue(taintsValue),
				MarkdownDescription: "Kubernetes taints on the nodes.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"key":   schema.StringAttribute{Required: true, MarkdownDescription: "Taint key, e.g. `nvidia.com/gpu`."},
					"value": schema.StringAttribute{Optional: true, MarkdownDescription: "Taint value."},
					"effect": schema.StringAttribute{Required: true, MarkdownDescription: "`NO_SCHEDULE`, `NO_EXECUTE` or `PREFER_NO_SCHEDULE` (EKS spelling of NoSchedule and friends).",
						Validators: []validator.String{stringvalidator.OneOf("NO_SCHEDULE", "NO_EXECUTE", "PREFER_NO_SCHEDULE")}},
				}},
			},
		},
	}
}

func labelsText(labels map[string]string) string {
	var parts []string
	for k, v := range labels {
		parts = append(parts, "`"+k+"="+v+"`")
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
