package provider

import (
	"context"
	"fmt"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
)

// modelBucketModel is the model_bucket object: the S3 bucket the vLLM pods
// stream the weights from, and the VPC's S3 gateway endpoint. `bucket` and
// `region` are named as llmd_model_fleet.storage reads them, so the whole
// object passes as the fleet's storage.
type modelBucketModel struct {
	Name              types.String `tfsdk:"name"`
	ForceDestroy      types.Bool   `tfsdk:"force_destroy"`
	Bucket            types.String `tfsdk:"bucket"`
	ARN               types.String `tfsdk:"arn"`
	Region            types.String `tfsdk:"region"`
	GatewayEndpointID types.String `tfsdk:"gateway_endpoint_id"`
}

var modelBucketTypes = map[string]attr.Type{"name": types.StringType, "force_destroy": types.BoolType, "bucket": types.StringType,
	"arn": types.StringType, "region": types.StringType, "gateway_endpoint_id": types.StringType}

var bucketNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`)

// S3's naming rules for general purpose buckets (S3 user guide "General
// purpose bucket naming rules"), the part a pattern can check.
var bucketNameValidators = []validator.String{stringvalidator.LengthBetween(3, 63), stringvalidator.RegexMatches(bucketNamePattern,
	"must be an S3 bucket name: lowercase letters, digits, dots and hyphens, a letter or digit at each end")}

func modelBucketAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		MarkdownDescription: "An S3 bucket for the model weights, which the vLLM pods stream straight from S3 (Run:ai Model Streamer) instead of reading " +
			"them from FSx for Lustre; unset for none. With it the cluster's VPC gets an S3 gateway endpoint on the route tables of the nodes' subnets, so the " +
			"pods' S3 traffic never crosses the NAT gateway (gateway endpoints cost nothing; NAT gateways charge per GB); in a VPC of yours, a route table an S3 " +
			"gateway endpoint serves already keeps it. Leave `name` unset for the cluster to create a private bucket named from the cluster, the region and a hash of " +
			"the account (`llmd-<name>-<region>-<8 hex>`), tagged like every part: S3 Block Public Access on, ACLs off (BucketOwnerEnforced), SSE-S3 " +
			"encryption, and a bucket policy refusing requests without TLS; creating it needs `s3:CreateBucket` and `s3:TagResource` (the tags come with the " +
			"create). Or give `name` of a bucket of yours in the provider's region, used as it is. Pass the whole object as `storage` to `llmd_model_fleet`, " +
			"which reads `bucket` and `region`. Removing `model_bucket`, or giving `name` instead, deletes a created bucket, which `force_destroy` governs.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Optional: true, Validators: bucketNameValidators,
				MarkdownDescription: "An existing bucket in the provider's region, used as it is: never created, emptied, deleted or changed (its policy neither). " +
					"The apply checks that it exists and is in the provider's region (the gateway endpoint serves that region only). Unset: the cluster creates one."},
			"force_destroy": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Whether deleting the bucket the cluster created (destroy, replacing the cluster, removing `model_bucket`, or giving `name` instead) " +
					"deletes the objects in it, every version, first; default `false`: a plan or apply that would delete it while it holds objects is an error naming " +
					"their count. Set it to `true` and apply before the destroy. Never applies to a bucket given by `name`."},
			"bucket":              computedString("The bucket's name: `name`, or the created bucket's."),
			"arn":                 computedString("ARN of the bucket."),
			"region":              computedString("Region of the bucket: the provider's."),
			"gateway_endpoint_id": computedString("The S3 gateway endpoint serving the nodes' route tables: the cluster's own, or one the VPC had already."),
		},
	}
}

// modelBucketSpec is the plan's bucket, nil without model_bucket.
func modelBucketSpec(ctx context.Context, obj types.Object, diags *diag.Diagnostics) *awsinfra.ModelBucketSpec {
	if obj.IsNull() || obj.IsUnknown() {
		return nil
	}
	var m modelBucketModel
	diags.Append(obj.As(ctx, &m, asObject)...)
	return &awsinfra.ModelBucketSpec{Name: m.Name.ValueString()}
}

// forceDestroyBucket is model_bucket.force_destroy of the plan, or of the
// prior state when the plan drops model_bucket: what the user last applied.
func forceDestroyBucket(ctx context.Context, plan, prior types.Object) bool {
	for _, obj := range []types.Object{plan, prior} {
		if obj.IsNull() || obj.IsUnknown() {
			continue
		}
		var m modelBucketModel
		_ = obj.As(ctx, &m, asObject)
		return m.ForceDestroy.ValueBool()
	}
	return false
}

// modelBucketObject is model_bucket as read back; prior supplies what AWS
// does not hold (name, force_destroy) and says whether there is one.
func modelBucketObject(mb *awsinfra.ModelBucket, prior types.Object) types.Object {
	if prior.IsNull() || prior.IsUnknown() || mb == nil {
		return types.ObjectNull(modelBucketTypes)
	}
	v := prior.Attributes()
	str := func(s string) types.String {
		if s == "" {
			return types.StringNull()
		}
		return types.StringValue(s)
	}
	if f, ok := v["force_destroy"].(types.Bool); !ok || f.IsNull() || f.IsUnknown() {
		v["force_destroy"] = types.BoolValue(false)
	}
	v["bucket"], v["arn"], v["region"], v["gateway_endpoint_id"] = str(mb.Name), str(mb.ARN), str(mb.Region), str(mb.GatewayEndpointID)
	return types.ObjectValueMust(modelBucketTypes, v)
}

// createdBucket is the bucket the cluster created according to a
// model_bucket object, "" when it uses a given one or has none.
func createdBucket(ctx context.Context, obj types.Object) (name string, force bool) {
	if obj.IsNull() || obj.IsUnknown() {
		return "", false
	}
	var m modelBucketModel
	if obj.As(ctx, &m, asObject).HasError() || !m.Name.IsNull() {
		return "", false
	}
	return m.Bucket.ValueString(), m.ForceDestroy.ValueBool()
}

// planModelBucket refuses, at plan time, a plan that deletes the bucket the
// cluster created while it holds objects and force_destroy is false (one
// listing, only in such a plan), and fills in what the plan can know: the
// given bucket's name, or the created one's (one STS call when it is new),
// its ARN and region, and AWS's values that stay. c is nil where the
// provider is not configured; destroy and replacing say the whole cluster
// goes.
func planModelBucket(ctx context.Context, c *awsinfra.Clients, cluster string, plan, prior types.Object, destroy, replacing bool) (types.Object, diag.Diagnostics) {
	var diags diag.Diagnostics
	if !destroy && plan.IsUnknown() {
		// Not known until another resource is applied: nothing to tell yet.
		return plan, diags
	}
	at := path.Root("model_bucket")
	var want modelBucketModel
	on := !destroy && !plan.IsNull() && !plan.IsUnknown() && !plan.As(ctx, &want, asObject).HasError()
	have, haveForce := createdBucket(ctx, prior)
	var reason string
	switch {
	case have == "":
	case destroy:
		reason = "destroying the cluster deletes it"
	case replacing:
		reason = "this plan replaces the whole cluster, which deletes it"
	case !on:
		reason = "removing model_bucket deletes it"
	case !want.Name.IsNull():
		reason = "giving model_bucket.name instead deletes it"
	}
	force := haveForce
	if on && !want.ForceDestroy.IsUnknown() && !want.ForceDestroy.IsNull() {
		force = want.ForceDestroy.ValueBool()
	}
	if reason != "" && want.Name.ValueString() != have {
		if force {
			diags.AddAttributeWarning(at, "model_bucket will be deleted with its objects",
				fmt.Sprintf("S3 bucket %s and every object version in it are deleted: %s (model_bucket.force_destroy is true).", have, reason))
		} else if c != nil {
			n, more, err := c.CountBucketObjects(ctx, have)
			switch {
			case err != nil:
				diags.AddAttributeWarning(at, "model_bucket's objects not counted", "The apply checks again before it deletes anything: "+err.Error())
			case n > 0:
				diags.AddAttributeError(at.AtName("force_destroy"), "model_bucket holds objects",
					fmt.Sprintf("S3 bucket %s holds %s (the model weights) and %s. model_bucket.force_destroy is false: set it to true and apply, "+
						"then run this plan again; or move the objects out first.", have, awsinfra.ObjectCount(n, more), reason))
			}
		}
	}
	if !on || diags.HasError() {
		return plan, diags
	}
	v := plan.Attributes()
	keep := !replacing && !prior.IsNull() && !prior.IsUnknown()
	old := map[string]attr.Value{}
	if keep {
		old = prior.Attributes()
	}
	v["region"], v["bucket"], v["arn"] = types.StringUnknown(), types.StringUnknown(), types.StringUnknown()
	if c != nil {
		v["region"] = types.StringValue(c.Config.Region)
	}
	switch {
	case want.Name.IsUnknown():
	case !want.Name.IsNull():
		v["bucket"] = want.Name
		if c != nil {
			v["arn"] = types.StringValue(awsinfra.BucketARN(c.Config.Region, want.Name.ValueString()))
		}
	case keep && have != "":
		v["bucket"], v["arn"] = old["bucket"], old["arn"]
	case c != nil:
		// A bucket to create (or to create again): its name is known now.
		if name, arn, err := c.PlannedModelBucket(ctx, cluster, awsinfra.ModelBucketSpec{}); err == nil {
			v["bucket"], v["arn"] = types.StringValue(name), types.StringValue(arn)
		}
	}
	v["gateway_endpoint_id"] = types.StringUnknown()
	if id, ok := old["gateway_endpoint_id"].(types.String); ok && id.ValueString() != "" {
		v["gateway_endpoint_id"] = id
	}
	return types.ObjectValueMust(modelBucketTypes, v), diags
}

// readModelBucket reads back the bucket the state records and the gateway
// endpoint: two calls, and no listing of objects.
func readModelBucket(ctx context.Context, c *awsinfra.Clients, cluster string, state types.Object, vpcID string) (*awsinfra.ModelBucket, error) {
	var m modelBucketModel
	if d := state.As(ctx, &m, asObject); d.HasError() {
		return nil, fmt.Errorf("reading model_bucket from state: %v", d)
	}
	name, created := m.Name.ValueString(), m.Name.IsNull()
	if created {
		name = m.Bucket.ValueString()
	}
	return c.FindModelBucket(ctx, cluster, name, created, vpcID)
}
