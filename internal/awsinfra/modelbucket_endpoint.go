package awsinfra

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// The S3 gateway endpoint keeps the pods' weight downloads off the NAT
// gateway: a gateway endpoint adds a route to S3's prefix list to the route
// tables it serves, so traffic from those subnets to S3 in the region goes
// straight to S3, and gateway endpoints cost nothing, while a NAT gateway
// charges for every GB it processes (AWS PrivateLink guide "Gateway
// endpoints for Amazon S3"; Amazon VPC pricing). Its policy is the default
// full access: the nodes pull image layers from ECR's own buckets through
// it as well.
const endpointPart = "s3-endpoint"

// s3Service is the gateway endpoint service of S3 in a region.
func s3Service(region string) string { return "com.amazonaws." + region + ".s3" }

// endpointLive reports whether an endpoint still routes (or is about to).
func endpointLive(ep ec2types.VpcEndpoint) bool {
	for _, gone := range []ec2types.State{ec2types.StateDeleting, ec2types.StateDeleted, ec2types.StateFailed, ec2types.StateRejected, ec2types.StateExpired} {
		if strings.EqualFold(string(ep.State), string(gone)) {
			return false
		}
	}
	return true
}

// s3GatewayEndpoints are the live S3 gateway endpoints of a VPC, by id.
func (c *Clients) s3GatewayEndpoints(ctx context.Context, vpcID string) ([]ec2types.VpcEndpoint, error) {
	out, err := c.EC2.DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{Filters: []ec2types.Filter{ec2Filter("vpc-id", vpcID),
		ec2Filter("service-name", s3Service(c.Config.Region)), ec2Filter("vpc-endpoint-type", string(ec2types.VpcEndpointTypeGateway))}})
	if err != nil {
		return nil, fmt.Errorf("listing S3 gateway endpoints of VPC %s: %w", vpcID, err)
	}
	eps := slices.DeleteFunc(out.VpcEndpoints, func(ep ec2types.VpcEndpoint) bool { return !endpointLive(ep) })
	slices.SortFunc(eps, func(a, b ec2types.VpcEndpoint) int {
		return strings.Compare(aws.ToString(a.VpcEndpointId), aws.ToString(b.VpcEndpointId))
	})
	return eps, nil
}

func (c *Clients) ownsEndpoint(ep ec2types.VpcEndpoint, owner string) bool {
	tags := fromEC2Tags(ep.Tags)
	return tags[OwnerTag] == owner && tags[partTag] == endpointPart
}

// findGatewayEndpointID is the S3 gateway endpoint serving the cluster: its
// own, else one that was there already; "" for none.
func (c *Clients) findGatewayEndpointID(ctx context.Context, owner, vpcID string) (string, error) {
	if vpcID == "" {
		return "", nil
	}
	eps, err := c.s3GatewayEndpoints(ctx, vpcID)
	if err != nil || len(eps) == 0 {
		return "", err
	}
	for _, ep := range eps {
		if c.ownsEndpoint(ep, owner) {
			return aws.ToString(ep.VpcEndpointId), nil
		}
	}
	return aws.ToString(eps[0].VpcEndpointId), nil
}

// nodeRouteTables are the route tables of the nodes' subnets: each
// subnet's own, else the VPC's main table, which serves every subnet
// without one (VPC user guide "Route tables").
func (c *Clients) nodeRouteTables(ctx context.Context, vpcID string, subnets []string) ([]string, error) {
	out, err := c.EC2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{ec2Filter("vpc-id", vpcID)}})
	if err != nil {
		return nil, fmt.Errorf("listing route tables of VPC %s: %w", vpcID, err)
	}
	var main string
	bySubnet := map[string]string{}
	for _, rt := range out.RouteTables {
		for _, a := range rt.Associations {
			if aws.ToBool(a.Main) {
				main = aws.ToString(rt.RouteTableId)
			} else if a.SubnetId != nil {
				bySubnet[aws.ToString(a.SubnetId)] = aws.ToString(rt.RouteTableId)
			}
		}
	}
	var tables []string
	for _, sn := range subnets {
		rt := bySubnet[sn]
		if rt == "" {
			rt = main
		}
		if rt != "" && !slices.Contains(tables, rt) {
			tables = append(tables, rt)
		}
	}
	slices.Sort(tables)
	return tables, nil
}

// ensureGatewayEndpoint gives the nodes' route tables an S3 gateway
// endpoint. A route table has one route per prefix list, so a table an
// endpoint of someone else's serves already is left to it (EC2 refuses a
// second with RouteAlreadyExists); the cluster's own endpoint, created or
// adopted by its tags, takes the others. Where every table is served, the
// cluster creates none.
func (c *Clients) ensureGatewayEndpoint(ctx context.Context, spec ClusterSpec, vpcID string, subnets []string) error {
	tables, err := c.nodeRouteTables(ctx, vpcID, subnets)
	if err != nil {
		return err
	}
	eps, err := c.s3GatewayEndpoints(ctx, vpcID)
	if err != nil {
		return err
	}
	var ours *ec2types.VpcEndpoint
	served := map[string]bool{}
	for i, ep := range eps {
		if c.ownsEndpoint(ep, spec.Name) && ours == nil {
			ours = &eps[i]
			continue
		}
		for _, rt := range ep.RouteTableIds {
			served[rt] = true
		}
	}
	var missing []string
	for _, rt := range tables {
		if !served[rt] && (ours == nil || !slices.Contains(ours.RouteTableIds, rt)) {
			missing = append(missing, rt)
		}
	}
	switch {
	case ours == nil && len(missing) == 0:
		if len(eps) > 0 {
			c.logf(ctx, "an S3 gateway endpoint serves the nodes' route tables already; creating none", map[string]any{"id": aws.ToString(eps[0].VpcEndpointId)})
		}
		return nil
	case ours == nil:
		tags := c.tagSet(spec.Name, spec.Tags, endpointPart)
		tags["Name"] = spec.Name + "-s3"
		out, err := c.EC2.CreateVpcEndpoint(ctx, &ec2.CreateVpcEndpointInput{VpcId: aws.String(vpcID), ServiceName: aws.String(s3Service(c.Config.Region)),
			VpcEndpointType: ec2types.VpcEndpointTypeGateway, RouteTableIds: missing,
			TagSpecifications: ec2TagSpec(ec2types.ResourceTypeVpcEndpoint, tags)})
		if err != nil {
			return fmt.Errorf("creating the S3 gateway endpoint of %s in VPC %s (route tables %v): %w", spec.Name, vpcID, missing, err)
		}
		return c.waitGatewayEndpoint(ctx, aws.ToString(out.VpcEndpoint.VpcEndpointId))
	default:
		id := aws.ToString(ours.VpcEndpointId)
		c.adopted(ctx, "S3 gateway endpoint", id)
		if len(missing) == 0 {
			return nil
		}
		if _, err := c.EC2.ModifyVpcEndpoint(ctx, &ec2.ModifyVpcEndpointInput{VpcEndpointId: aws.String(id), AddRouteTableIds: missing}); err != nil {
			return fmt.Errorf("adding route tables %v to S3 gateway endpoint %s: %w", missing, id, err)
		}
		return c.waitGatewayEndpoint(ctx, id)
	}
}

// waitGatewayEndpoint waits for an endpoint to become available: EC2 answers
// the create with the endpoint pending (terraform-provider-aws
// vpc_endpoint.go waits for available the same way).
func (c *Clients) waitGatewayEndpoint(ctx context.Context, id string) error {
	return c.waitFor(ctx, "S3 gateway endpoint "+id+" to become available", func(ctx context.Context) error {
		out, err := c.EC2.DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{VpcEndpointIds: []string{id}})
		switch {
		case isNotFound(err) || (err == nil && len(out.VpcEndpoints) == 0):
			return pending("not found yet")
		case err != nil:
			return fmt.Errorf("describing VPC endpoint %s: %w", id, err)
		}
		ep := out.VpcEndpoints[0]
		switch {
		case strings.EqualFold(string(ep.State), string(ec2types.StateAvailable)):
			return nil
		case strings.EqualFold(string(ep.State), string(ec2types.StatePending)), strings.EqualFold(string(ep.State), string(ec2types.StatePendingAcceptance)):
			return pending("state %s", ep.State)
		default:
			reason := "no reason given"
			if ep.LastError != nil {
				reason = aws.ToString(ep.LastError.Code) + ": " + aws.ToString(ep.LastError.Message)
			}
			return fmt.Errorf("VPC endpoint %s is %s: %s", id, ep.State, reason)
		}
	})
}

// deleteGatewayEndpoint deletes the cluster's S3 gateway endpoints (found
// by their tags, in any VPC) and waits until they are gone; an endpoint
// the cluster did not create is left alone. DeleteVpcEndpoints reports an
// endpoint it could not delete in its answer, not as an error.
func (c *Clients) deleteGatewayEndpoint(ctx context.Context, owner string) error {
	out, err := c.EC2.DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{Filters: ownerFilters(owner, endpointPart)})
	if err != nil {
		return fmt.Errorf("finding the S3 gateway endpoint of %s: %w", owner, err)
	}
	var ids []string
	for _, ep := range out.VpcEndpoints {
		if endpointLive(ep) || strings.EqualFold(string(ep.State), string(ec2types.StateDeleting)) {
			ids = append(ids, aws.ToString(ep.VpcEndpointId))
		}
	}
	if len(ids) == 0 {
		return nil
	}
	del, err := c.EC2.DeleteVpcEndpoints(ctx, &ec2.DeleteVpcEndpointsInput{VpcEndpointIds: ids})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting S3 gateway endpoints %v of %s: %w", ids, owner, err)
	}
	if del != nil {
		for _, u := range del.Unsuccessful {
			if u.Error != nil && !strings.HasSuffix(aws.ToString(u.Error.Code), "NotFound") {
				return fmt.Errorf("deleting S3 gateway endpoint %s of %s: %s: %s", aws.ToString(u.ResourceId), owner, aws.ToString(u.Error.Code), aws.ToString(u.Error.Message))
			}
		}
	}
	return c.waitFor(ctx, "S3 gateway endpoints "+strings.Join(ids, ", ")+" to be deleted", func(ctx context.Context) error {
		out, err := c.EC2.DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{VpcEndpointIds: ids})
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("describing VPC endpoints %v: %w", ids, err)
		}
		for _, ep := range out.VpcEndpoints {
			if !strings.EqualFold(string(ep.State), string(ec2types.StateDeleted)) {
				return pending("%s is %s", aws.ToString(ep.VpcEndpointId), ep.State)
			}
		}
		return nil
	})
}

// updateModelBucket brings the bucket and the endpoint to the spec: a
// created bucket the spec no longer uses (model_bucket off, or a bucket
// given by name instead) is deleted, emptied only with
// spec.ForceDestroyBucket; the endpoint goes with model_bucket.
func (c *Clients) updateModelBucket(ctx context.Context, spec ClusterSpec, net Network) error {
	if spec.ModelBucket == nil {
		return parallel(
			func() error { return c.deleteGatewayEndpoint(ctx, spec.Name) },
			func() error { return c.deleteCreatedBucket(ctx, spec.Name, spec.ForceDestroyBucket) },
		)
	}
	if given := spec.ModelBucket.Name; given != "" {
		created, err := c.createdBucketName(ctx, spec.Name)
		if err != nil {
			return err
		}
		if given != created {
			if err := c.deleteCreatedBucket(ctx, spec.Name, spec.ForceDestroyBucket); err != nil {
				return err
			}
		}
	}
	return parallel(
		func() error {
			if err := c.ensureModelBucket(ctx, spec); err != nil {
				return err
			}
			return c.syncBucketTags(ctx, spec)
		},
		func() error { return c.ensureGatewayEndpoint(ctx, spec, net.VPCID, net.PrivateSubnetIDs) },
	)
}
