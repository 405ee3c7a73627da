package provider

import (
	"context"
	"fmt"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// target is the router_target of the desired fleet: with weights in S3 it
// names the reader's IAM role, which the router binds its own service
// account to for the tokenizer files.
func (d desired) target() workloads.RouterTarget {
	t := d.fleet.Target()
	if d.fleet.Storage.S3 != nil && d.conn.cluster != nil {
		t.S3ReaderRole = awsinfra.WeightsRoleName(d.conn.cluster.Name.ValueString(), d.conn.cluster.Region.ValueString(), d.fleet.Namespace, d.fleet.Name, false)
	}
	return t
}

// weightsAccessSpec is the fleet's access to its bucket, on the cluster of conn.
func weightsAccessSpec(f workloads.Fleet, conn connection) awsinfra.WeightsAccessSpec {
	return awsinfra.WeightsAccessSpec{Cluster: conn.cluster.Name.ValueString(), Namespace: f.Namespace, Fleet: f.Name,
		Bucket: f.Storage.S3.Bucket, Prefix: f.S3Prefix(), ReaderServiceAccount: f.ReaderServiceAccount(), WriterServiceAccount: f.WriterServiceAccount()}
}

// awsFor is the provider's AWS clients for work on the cluster of conn,
// which must be in the provider's region: the roles' names and the Pod
// Identity associations are made there.
func awsFor(data *providerData, conn connection, what string) (*awsinfra.Clients, error) {
	if data == nil || data.AWS == nil {
		return nil, fmt.Errorf("%s: the provider has no AWS configuration", what)
	}
	if r := conn.cluster.Region.ValueString(); r != "" && r != data.AWS.Config.Region {
		return nil, fmt.Errorf("%s: the cluster is in %s but the provider in %s; use a provider for the cluster's region", what, r, data.AWS.Config.Region)
	}
	return data.AWS, nil
}

// ensureWeightsAccess gives the fleet's pods and staging Job their roles
// before any of them is created (EKS injects Pod Identity credentials when
// a pod starts).
func (r *modelFleetResource) ensureWeightsAccess(ctx context.Context, d desired) error {
	if d.fleet.Storage.S3 == nil {
		return nil
	}
	aws, err := awsFor(r.data, d.conn, "storage.bucket")
	if err != nil {
		return err
	}
	_, err = aws.EnsureWeightsAccess(ctx, weightsAccessSpec(d.fleet, d.conn))
	return err
}

// deleteWeightsAccess removes the roles and associations a fleet with
// weights in S3 had (its objects are already gone or no longer use them).
func (r *modelFleetResource) deleteWeightsAccess(ctx context.Context, state *modelFleetModel) error {
	d, err := state.desired(ctx, state)
	if err != nil || d.fleet.Storage.S3 == nil {
		return err
	}
	aws, err := awsFor(r.data, d.conn, "storage.bucket")
	if err != nil {
		return err
	}
	return aws.DeleteWeightsAccess(ctx, weightsAccessSpec(d.fleet, d.conn))
}
