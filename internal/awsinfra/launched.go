package awsinfra

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
)

// The GPU nodes of the compute modes other than the GPU node group are
// launched by something else (Karpenter, EKS Auto Mode): their node role
// needs an access entry of its own, and their instances are found by the
// tags their launcher puts on them rather than by the owner tag.

// liveStates are the instance states of an instance not yet gone.
var liveStates = []string{"pending", "running", "stopping", "stopped", "shutting-down"}

// nodeEntry is the access entry of a launcher's node role: its EKS type,
// the part tag it carries and who it is for, in messages.
type nodeEntry struct {
	kind, part, who string
}

// ensureNodeEntry gives the node role an access entry of the entry's type.
// One of that type already there is adopted (tagged as the part unless
// access_entries declares it); one of another type (the role declared in
// access_entries) is an error naming it.
func (c *Clients) ensureNodeEntry(ctx context.Context, spec ClusterSpec, nodeARN string, e nodeEntry) error {
	got, err := c.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(spec.Name), PrincipalArn: aws.String(nodeARN)})
	switch {
	case err == nil:
		have := got.AccessEntry
		if t := aws.ToString(have.Type); t != e.kind {
			return fmt.Errorf("the access entry of %s %s on cluster %s is of type %s, not %s: remove the role from access_entries "+
				"(or delete the entry), then apply again", e.who, nodeARN, spec.Name, t, e.kind)
		}
		switch have.Tags[partTag] {
		case e.part, accessEntryPart, adoptedEntryPart:
			return nil
		}
		c.adopted(ctx, "EKS access entry", nodeARN)
		if _, err := c.EKS.TagResource(ctx, &eks.TagResourceInput{ResourceArn: have.AccessEntryArn, Tags: c.tagSet(spec.Name, spec.Tags, e.part)}); err != nil {
			return fmt.Errorf("tagging access entry %s on cluster %s: %w", nodeARN, spec.Name, err)
		}
		return nil
	case isNotFound(err):
		// A role made a moment ago may not be known to EKS yet.
		return c.createRetryingIAM(ctx, "EKS access entry of "+e.who+" on cluster "+spec.Name, func(ctx context.Context) error {
			_, err := c.EKS.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String(spec.Name), PrincipalArn: aws.String(nodeARN),
				Type: aws.String(e.kind), Tags: c.tagSet(spec.Name, spec.Tags, e.part)})
			return err
		})
	default:
		return fmt.Errorf("finding the access entry of %s %s on cluster %s: %w", e.who, nodeARN, spec.Name, err)
	}
}

// deleteNodeEntry deletes the node role's access entry if it is the one
// ensureNodeEntry made or adopted.
func (c *Clients) deleteNodeEntry(ctx context.Context, cluster, nodeARN string, e nodeEntry) error {
	if nodeARN == "" {
		return nil
	}
	got, err := c.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(nodeARN)})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finding the access entry of %s %s on cluster %s: %w", e.who, nodeARN, cluster, err)
	}
	if got.AccessEntry.Tags[partTag] != e.part {
		return nil
	}
	if _, err := c.EKS.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(nodeARN)}); err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting the access entry of %s %s on cluster %s: %w", e.who, nodeARN, cluster, err)
	}
	return nil
}

// launchedNodes are the instances the filters select that keep (given
// their tags) accepts: the filters are the API's, keep is for emulators
// that ignore some. what names them in errors.
func (c *Clients) launchedNodes(ctx context.Context, what string, filters []ec2types.Filter, keep func(map[string]string) bool) ([]ec2types.Instance, error) {
	var out []ec2types.Instance
	p := ec2.NewDescribeInstancesPaginator(c.EC2, &ec2.DescribeInstancesInput{Filters: filters})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", what, err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				if keep(fromEC2Tags(i.Tags)) {
					out = append(out, i)
				}
			}
		}
	}
	return out, nil
}

// waitNodesGone waits until list finds no live instance: they hold network
// interfaces in the cluster's subnets, which the network's delete needs free.
func (c *Clients) waitNodesGone(ctx context.Context, what string, list func(ctx context.Context, states ...string) ([]ec2types.Instance, error)) error {
	return c.waitFor(ctx, what+" to terminate", func(ctx context.Context) error {
		left, err := list(ctx, liveStates...)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return pending("%d instances left", len(left))
		}
		return nil
	})
}

// ownedNodeParts lists the live instances list finds as owned parts of kind.
func ownedNodeParts(ctx context.Context, kind string, list func(ctx context.Context, states ...string) ([]ec2types.Instance, error)) ([]OwnedPart, error) {
	nodes, err := list(ctx, liveStates...)
	if err != nil {
		return nil, err
	}
	var parts []OwnedPart
	for _, n := range nodes {
		parts = append(parts, OwnedPart{kind, aws.ToString(n.InstanceId), fromEC2Tags(n.Tags)})
	}
	return parts, nil
}
