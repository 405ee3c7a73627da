package awsinfra

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// OwnedPart is one AWS object carrying a cluster's owner tag.
type OwnedPart struct {
	// Kind is the service and type, e.g. "ec2 subnet", "iam role", "eks cluster".
	Kind string
	ID   string
	Tags map[string]string
}

// FindOwnedParts lists every live object in EC2, IAM, FSx, S3, EKS, SQS and
// EventBridge that carries the owner tag of the cluster (EKS Auto Mode's
// node role among the roles), and the instances Karpenter and EKS Auto Mode
// launched for it: what a destroy must leave empty. EC2 is listed per
// type rather than through DescribeTags, which also lists deleted objects.
func (c *Clients) FindOwnedParts(ctx context.Context, owner string) ([]OwnedPart, error) {
	parts, err := c.ownedEC2(ctx, owner)
	if err != nil {
		return nil, err
	}
	roles, err := c.ownedRoles(ctx, owner)
	if err != nil {
		return nil, err
	}
	parts = append(parts, roles...)
	karpenter, err := c.ownedKarpenterParts(ctx, owner, roles)
	if err != nil {
		return nil, err
	}
	parts = append(parts, karpenter...)
	autoMode, err := c.ownedAutoModeParts(ctx, owner)
	if err != nil {
		return nil, err
	}
	parts = append(parts, autoMode...)
	if fs, err := c.findStorage(ctx, owner); err != nil {
		return nil, err
	} else if fs != nil {
		parts = append(parts, OwnedPart{"fsx file-system", aws.ToString(fs.FileSystemId), fsxTagMap(fs.Tags)})
	}
	if bucket, err := c.createdBucketName(ctx, owner); err != nil {
		return nil, err
	} else if tags, owned, _, err := c.findCreatedBucket(ctx, owner, bucket); err != nil {
		return nil, err
	} else if owned {
		parts = append(parts, OwnedPart{"s3 bucket", bucket, tags})
	}
	clusters, err := c.EKS.ListClusters(ctx, &eks.ListClustersInput{})
	if err != nil {
		return nil, fmt.Errorf("listing EKS clusters: %w", err)
	}
	for _, name := range clusters.Clusters {
		cl, err := c.findEKSClusterByName(ctx, name)
		if err != nil {
			return nil, err
		}
		if cl == nil || cl.Tags[OwnerTag] != owner {
			continue
		}
		parts = append(parts, OwnedPart{"eks cluster", name, cl.Tags})
		ngs, err := c.EKS.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: aws.String(name)})
		if err != nil {
			return nil, fmt.Errorf("listing node groups of %s: %w", name, err)
		}
		for _, ng := range ngs.Nodegroups {
			got, err := c.findNodeGroupByName(ctx, name, ng)
			if err != nil {
				return nil, err
			}
			if got != nil && got.Tags[OwnerTag] == owner {
				parts = append(parts, OwnedPart{"eks nodegroup", name + "/" + ng, got.Tags})
			}
		}
	}
	return parts, nil
}

// ownedEC2 lists the live EC2 objects with the owner tag, type by type.
func (c *Clients) ownedEC2(ctx context.Context, owner string) ([]OwnedPart, error) {
	f := ownerFilters(owner, "")
	var parts []OwnedPart
	add := func(kind, id string, tags []ec2types.Tag) {
		parts = append(parts, OwnedPart{"ec2 " + kind, id, fromEC2Tags(tags)})
	}
	vpcs, err := c.EC2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing VPCs of %s: %w", owner, err)
	}
	for _, v := range vpcs.Vpcs {
		add("vpc", aws.ToString(v.VpcId), v.Tags)
	}
	subnets, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing subnets of %s: %w", owner, err)
	}
	for _, s := range subnets.Subnets {
		add("subnet", aws.ToString(s.SubnetId), s.Tags)
	}
	igws, err := c.EC2.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing internet gateways of %s: %w", owner, err)
	}
	for _, g := range igws.InternetGateways {
		add("internet-gateway", aws.ToString(g.InternetGatewayId), g.Tags)
	}
	rts, err := c.EC2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing route tables of %s: %w", owner, err)
	}
	for _, r := range rts.RouteTables {
		add("route-table", aws.ToString(r.RouteTableId), r.Tags)
	}
	eips, err := c.EC2.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing elastic IPs of %s: %w", owner, err)
	}
	for _, a := range eips.Addresses {
		add("elastic-ip", aws.ToString(a.AllocationId), a.Tags)
	}
	nats, err := c.findNATGateways(ctx, owner, "", "pending", "available", "deleting", "failed")
	if err != nil {
		return nil, err
	}
	for _, n := range nats {
		add("nat-gateway", aws.ToString(n.NatGatewayId), n.Tags)
	}
	sgs, err := c.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing security groups of %s: %w", owner, err)
	}
	for _, g := range sgs.SecurityGroups {
		add("security-group", aws.ToString(g.GroupId), g.Tags)
	}
	eps, err := c.EC2.DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing VPC endpoints of %s: %w", owner, err)
	}
	for _, ep := range eps.VpcEndpoints {
		if endpointLive(ep) {
			add("vpc-endpoint", aws.ToString(ep.VpcEndpointId), ep.Tags)
		}
	}
	lts, err := c.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing launch templates of %s: %w", owner, err)
	}
	for _, lt := range lts.LaunchTemplates {
		add("launch-template", aws.ToString(lt.LaunchTemplateId), lt.Tags)
	}
	return parts, nil
}

// ownedRoles lists the IAM roles carrying the owner tag and this region. A role deleted
// between the listing and its tag lookup (another cluster's destroy running
// beside this one) is gone, not owned.
func (c *Clients) ownedRoles(ctx context.Context, owner string) ([]OwnedPart, error) {
	var parts []OwnedPart
	pages := iam.NewListRolesPaginator(c.IAM, &iam.ListRolesInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing IAM roles: %w", err)
		}
		for _, r := range page.Roles {
			got, err := c.IAM.ListRoleTags(ctx, &iam.ListRoleTagsInput{RoleName: r.RoleName})
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("listing tags of IAM role %s: %w", aws.ToString(r.RoleName), err)
			}
			if tags := fromIAMTags(got.Tags); c.ownsRole(tags, owner) {
				parts = append(parts, OwnedPart{"iam role", aws.ToString(r.RoleName), tags})
			}
		}
	}
	return parts, nil
}
