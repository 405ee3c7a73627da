package provider

import (
	"context"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// bindWeightsReader lets the router read the tokenizer files of a fleet
// whose weights are in S3: its service account is bound by EKS Pod
// Identity to the fleet's reader role, before its pods start.
func (r *prefixRouterResource) bindWeightsReader(ctx context.Context, d routerDesired) error {
	role := d.router.Target.S3ReaderRole
	if role == "" {
		return nil
	}
	if d.conn.cluster == nil {
		return fmt.Errorf("fleet.s3_reader_role: binding the router to %s needs `cluster` (llmd_inference_cluster.<name>.kubernetes)", role)
	}
	aws, err := awsFor(r.data, d.conn, "fleet.s3_reader_role")
	if err != nil {
		return err
	}
	got, err := aws.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(role)})
	if err != nil {
		return fmt.Errorf("fleet.s3_reader_role: finding IAM role %s (made by the fleet with weights in S3): %w", role, err)
	}
	return aws.BindServiceAccount(ctx, d.conn.cluster.Name.ValueString(), d.router.Namespace, d.router.Name, awssdk.ToString(got.Role.Arn), nil)
}

// unbindWeightsReader removes the router's association once its objects
// are gone.
func (r *prefixRouterResource) unbindWeightsReader(ctx context.Context, state *prefixRouterModel) error {
	d, err := state.desired(ctx)
	if err != nil || d.router.Target.S3ReaderRole == "" || d.conn.cluster == nil {
		return err
	}
	aws, err := awsFor(r.data, d.conn, "fleet.s3_reader_role")
	if err != nil {
		return err
	}
	return aws.UnbindServiceAccount(ctx, d.conn.cluster.Name.ValueString(), d.router.Namespace, d.router.Name)
}
