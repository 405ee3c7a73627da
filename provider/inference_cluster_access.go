package provider

import (
	"context"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
)

type accessEntryModel struct {
	PolicyARN  types.String `tfsdk:"policy_arn"`
	Namespaces types.Set    `tfsdk:"namespaces"`
}

var accessEntryTypes = map[string]attr.Type{"policy_arn": types.StringType, "namespaces": stringSet}

func accessEntriesAttribute() schema.MapNestedAttribute {
	return schema.MapNestedAttribute{
		Optional: true,
		MarkdownDescription: "Access for other IAM principals (a CI role, people's roles), keyed by principal ARN: an EKS access entry with one access policy, " +
			"cluster-wide or in some namespaces. A plan role that only reads the cluster needs one, e.g. `AmazonEKSViewPolicy`. Changes in place; entries removed here are deleted " +
			"(one that existed before it was declared here is kept, with its policy removed). A node role (the cluster's own, or any role with an `EC2_LINUX` entry) cannot be " +
			"declared: EKS gives node entries no access policy, and the apply refuses it untouched.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"policy_arn": schema.StringAttribute{Required: true,
				MarkdownDescription: "EKS access policy, e.g. `arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy` or `.../AmazonEKSViewPolicy`."},
			"namespaces": schema.SetAttribute{ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Limit the policy to these namespaces; unset grants it cluster-wide."},
		}},
	}
}

func accessEntrySpecs(ctx context.Context, m types.Map, diags *diag.Diagnostics) []awsinfra.AccessEntrySpec {
	if m.IsNull() || m.IsUnknown() {
		return nil
	}
	var entries map[string]accessEntryModel
	diags.Append(m.ElementsAs(ctx, &entries, false)...)
	var out []awsinfra.AccessEntrySpec
	for principal, e := range entries {
		out = append(out, awsinfra.AccessEntrySpec{PrincipalARN: principal, PolicyARN: e.PolicyARN.ValueString(), Namespaces: stringsOf(ctx, e.Namespaces, diags)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PrincipalARN < out[j].PrincipalARN })
	return out
}

// accessEntriesMap is access_entries as read back; null stays null while
// there are none, so an unset attribute shows no diff.
func accessEntriesMap(entries []awsinfra.AccessEntry, prior types.Map) types.Map {
	t := types.ObjectType{AttrTypes: accessEntryTypes}
	if len(entries) == 0 && prior.IsNull() {
		return types.MapNull(t)
	}
	var priorNS map[string]attr.Value
	if !prior.IsNull() && !prior.IsUnknown() {
		priorNS = prior.Elements()
	}
	v := map[string]attr.Value{}
	for _, e := range entries {
		ns := types.SetNull(types.StringType)
		if len(e.Namespaces) > 0 {
			ns = setOf(e.Namespaces)
		} else if p, ok := priorNS[e.PrincipalARN].(types.Object); ok {
			// An empty set and an unset one both mean cluster-wide: keep the user's spelling.
			if pn, ok := p.Attributes()["namespaces"].(types.Set); ok && !pn.IsNull() && len(pn.Elements()) == 0 {
				ns = pn
			}
		}
		v[e.PrincipalARN] = types.ObjectValueMust(accessEntryTypes, map[string]attr.Value{"policy_arn": types.StringValue(e.PolicyARN), "namespaces": ns})
	}
	return types.MapValueMust(t, v)
}
