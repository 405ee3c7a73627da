package awsinfra

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// MaxAvailabilityZones bounds the created network: the VPC CIDR is cut into
// eight equal blocks, a private and a public subnet per zone.
const MaxAvailabilityZones = 4

// ensureNetwork finds or creates the cluster's VPC with a private and a public
// subnet per zone, an internet gateway for the public subnets and one NAT
// gateway for the private ones. Every part is found by its owner and part tags
// first, so a create that failed half way is resumed, not duplicated.
func (c *Clients) ensureNetwork(ctx context.Context, spec ClusterSpec, azs []string) (Network, error) {
	owner := spec.Name
	blocks, err := subnetBlocks(spec.Network.VPCCIDR, len(azs))
	if err != nil {
		return Network{}, err
	}
	vpcID, err := c.ensureVPC(ctx, spec)
	if err != nil {
		return Network{}, err
	}
	net := Network{VPCID: vpcID, VPCCIDR: spec.Network.VPCCIDR, Owned: true, AvailabilityZones: azs,
		PrivateSubnetIDs: make([]string, len(azs)), PublicSubnetIDs: make([]string, len(azs))}
	var igwID, eipID string
	var mu sync.Mutex
	jobs := []func() error{
		func() (err error) { igwID, err = c.ensureInternetGateway(ctx, spec, vpcID); return err },
		func() (err error) { eipID, err = c.ensureNATAddress(ctx, spec); return err },
	}
	for i, az := range azs {
		for _, kind := range []string{"private", "public"} {
			cidr := blocks[i]
			if kind == "public" {
				cidr = blocks[MaxAvailabilityZones+i]
			}
			jobs = append(jobs, func() error {
				id, err := c.ensureSubnet(ctx, spec, vpcID, kind, az, cidr)
				mu.Lock()
				defer mu.Unlock()
				if kind == "private" {
					net.PrivateSubnetIDs[i] = id
				} else {
					net.PublicSubnetIDs[i] = id
				}
				return err
			})
		}
	}
	if err := parallel(jobs...); err != nil {
		return net, err
	}
	var natID string
	err = parallel(
		func() error {
			return c.ensureRouteTable(ctx, spec, vpcID, "public", ec2types.Route{GatewayId: aws.String(igwID)}, net.PublicSubnetIDs)
		},
		func() (err error) {
			natID, err = c.ensureNATGateway(ctx, spec, net.PublicSubnetIDs[0], eipID)
			return err
		},
	)
	if err != nil {
		return net, err
	}
	if err := c.ensureRouteTable(ctx, spec, vpcID, "private", ec2types.Route{NatGatewayId: aws.String(natID)}, net.PrivateSubnetIDs); err != nil {
		return net, err
	}
	c.logf(ctx, "network ready", map[string]any{"owner": owner, "vpc_id": vpcID})
	return net, nil
}

// subnetBlocks cuts the VPC CIDR into 2*MaxAvailabilityZones equal blocks:
// private subnets take the first half so they keep their addresses when zones
// are added, public ones the second.
func subnetBlocks(vpcCIDR string, zones int) ([]string, error) {
	prefix, err := netip.ParsePrefix(vpcCIDR)
	if err != nil || !prefix.Addr().Is4() || prefix.Masked() != prefix {
		return nil, fmt.Errorf("networking.vpc_cidr: %q is not an IPv4 network address such as 10.0.0.0/16", vpcCIDR)
	}
	if prefix.Bits() < 16 || prefix.Bits() > 24 {
		return nil, fmt.Errorf("networking.vpc_cidr: %q must be between /16 and /24 (AWS allows /16 to /28 and each of 8 subnets needs room for nodes and pods)", vpcCIDR)
	}
	if zones < 2 || zones > MaxAvailabilityZones {
		return nil, fmt.Errorf("networking.availability_zones: EKS needs at least 2 zones and the created network holds at most %d, got %d", MaxAvailabilityZones, zones)
	}
	bits := prefix.Bits() + 3
	size := uint32(1) << (32 - bits)
	base := prefix.Addr().As4()
	start := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	blocks := make([]string, 2*MaxAvailabilityZones)
	for i := range blocks {
		a := start + uint32(i)*size
		blocks[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), bits).String()
	}
	return blocks, nil
}

// adopted logs a part found from an earlier create, the evidence of a resumed create.
func (c *Clients) adopted(ctx context.Context, kind, id string) {
	c.logf(ctx, "adopting existing "+kind, map[string]any{"id": id})
}

func (c *Clients) ensureVPC(ctx context.Context, spec ClusterSpec) (string, error) {
	out, err := c.EC2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: ownerFilters(spec.Name, "vpc")})
	if err != nil {
		return "", fmt.Errorf("finding VPC of %s: %w", spec.Name, err)
	}
	var id string
	if len(out.Vpcs) > 0 {
		id = aws.ToString(out.Vpcs[0].VpcId)
		c.adopted(ctx, "VPC", id)
	} else {
		tags := c.tagSet(spec.Name, spec.Tags, "vpc")
		tags["Name"] = spec.Name
		created, err := c.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String(spec.Network.VPCCIDR), TagSpecifications: ec2TagSpec(ec2types.ResourceTypeVpc, tags)})
		if err != nil {
			return "", fmt.Errorf("creating VPC %s: %w", spec.Name, err)
		}
		id = aws.ToString(created.Vpc.VpcId)
	}
	// EKS needs DNS hostnames for the private endpoint and node registration;
	// setting them again on an adopted VPC is harmless.
	for _, attr := range []*ec2.ModifyVpcAttributeInput{
		{VpcId: aws.String(id), EnableDnsSupport: &ec2types.AttributeBooleanValue{Value: aws.Bool(true)}},
		{VpcId: aws.String(id), EnableDnsHostnames: &ec2types.AttributeBooleanValue{Value: aws.Bool(true)}},
	} {
		if _, err := c.EC2.ModifyVpcAttribute(ctx, attr); err != nil {
			return id, fmt.Errorf("enabling DNS on VPC %s: %w", id, err)
		}
	}
	return id, nil
}

func (c *Clients) ensureInternetGateway(ctx context.Context, spec ClusterSpec, vpcID string) (string, error) {
	out, err := c.EC2.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{Filters: ownerFilters(spec.Name, "igw")})
	if err != nil {
		return "", fmt.Errorf("finding internet gateway of %s: %w", spec.Name, err)
	}
	var igw ec2types.InternetGateway
	if len(out.InternetGateways) > 0 {
		igw = out.InternetGateways[0]
		c.adopted(ctx, "internet gateway", aws.ToString(igw.InternetGatewayId))
	} else {
		created, err := c.EC2.CreateInternetGateway(ctx, &ec2.CreateInternetGatewayInput{
			TagSpecifications: ec2TagSpec(ec2types.ResourceTypeInternetGateway, c.tagSet(spec.Name, spec.Tags, "igw"))})
		if err != nil {
			return "", fmt.Errorf("creating internet gateway for %s: %w", spec.Name, err)
		}
		igw = *created.InternetGateway
	}
	id := aws.ToString(igw.InternetGatewayId)
	for _, a := range igw.Attachments {
		if aws.ToString(a.VpcId) == vpcID {
			return id, nil
		}
	}
	if _, err := c.EC2.AttachInternetGateway(ctx, &ec2.AttachInternetGatewayInput{InternetGatewayId: aws.String(id), VpcId: aws.String(vpcID)}); err != nil {
		return id, fmt.Errorf("attaching internet gateway %s to VPC %s: %w", id, vpcID, err)
	}
	return id, nil
}

func (c *Clients) ensureSubnet(ctx context.Context, spec ClusterSpec, vpcID, kind, az, cidr string) (string, error) {
	part := kind + "-" + az
	out, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: ownerFilters(spec.Name, part)})
	if err != nil {
		return "", fmt.Errorf("finding %s subnet of %s: %w", part, spec.Name, err)
	}
	if len(out.Subnets) > 0 {
		id := aws.ToString(out.Subnets[0].SubnetId)
		c.adopted(ctx, "subnet", id)
		return id, nil
	}
	tags := c.tagSet(spec.Name, spec.Tags, part)
	tags["Name"] = spec.Name + "-" + part
	// The role tags tell the AWS load balancer controller where to put load balancers.
	if kind == "public" {
		tags["kubernetes.io/role/elb"] = "1"
	} else {
		tags["kubernetes.io/role/internal-elb"] = "1"
	}
	created, err := c.EC2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: aws.String(vpcID), CidrBlock: aws.String(cidr), AvailabilityZone: aws.String(az),
		TagSpecifications: ec2TagSpec(ec2types.ResourceTypeSubnet, tags)})
	if err != nil {
		return "", fmt.Errorf("creating %s subnet %s in %s: %w", kind, cidr, az, err)
	}
	return aws.ToString(created.Subnet.SubnetId), nil
}

func (c *Clients) ensureNATAddress(ctx context.Context, spec ClusterSpec) (string, error) {
	out, err := c.EC2.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: ownerFilters(spec.Name, "nat-eip")})
	if err != nil {
		return "", fmt.Errorf("finding NAT elastic IP of %s: %w", spec.Name, err)
	}
	if len(out.Addresses) > 0 {
		id := aws.ToString(out.Addresses[0].AllocationId)
		c.adopted(ctx, "elastic IP", id)
		return id, nil
	}
	created, err := c.EC2.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: ec2types.DomainTypeVpc,
		TagSpecifications: ec2TagSpec(ec2types.ResourceTypeElasticIp, c.tagSet(spec.Name, spec.Tags, "nat-eip"))})
	if err != nil {
		return "", fmt.Errorf("allocating NAT elastic IP for %s: %w", spec.Name, err)
	}
	return aws.ToString(created.AllocationId), nil
}

func (c *Clients) ensureNATGateway(ctx context.Context, spec ClusterSpec, subnetID, allocationID string) (string, error) {
	nats, err := c.findNATGateways(ctx, spec.Name, "nat", "pending", "available")
	if err != nil {
		return "", err
	}
	var id string
	if len(nats) > 0 {
		id = aws.ToString(nats[0].NatGatewayId)
		c.adopted(ctx, "NAT gateway", id)
	} else {
		created, err := c.EC2.CreateNatGateway(ctx, &ec2.CreateNatGatewayInput{SubnetId: aws.String(subnetID), AllocationId: aws.String(allocationID),
			TagSpecifications: ec2TagSpec(ec2types.ResourceTypeNatgateway, c.tagSet(spec.Name, spec.Tags, "nat"))})
		if err != nil {
			return "", fmt.Errorf("creating NAT gateway for %s: %w", spec.Name, err)
		}
		id = aws.ToString(created.NatGateway.NatGatewayId)
	}
	return id, c.waitFor(ctx, "NAT gateway "+id+" to become available", func(ctx context.Context) error {
		out, err := c.EC2.DescribeNatGateways(ctx, &ec2.DescribeNatGatewaysInput{NatGatewayIds: []string{id}})
		if err != nil {
			return err
		}
		if len(out.NatGateways) == 0 {
			return pending("not listed yet")
		}
		switch st := out.NatGateways[0].State; st {
		case ec2types.NatGatewayStateAvailable:
			return nil
		case ec2types.NatGatewayStatePending:
			return pending("state %s", st)
		default:
			return fmt.Errorf("NAT gateway %s is %s: %s", id, st, aws.ToString(out.NatGateways[0].FailureMessage))
		}
	})
}

// findNATGateways lists the owner's NAT gateways (of one part, if given) in
// the given states. The tags are checked here as well as in the filter:
// moto ignores tag filters on DescribeNatGateways, and adopting another
// cluster's NAT gateway would route this cluster through it.
func (c *Clients) findNATGateways(ctx context.Context, owner, part string, states ...string) ([]ec2types.NatGateway, error) {
	out, err := c.EC2.DescribeNatGateways(ctx, &ec2.DescribeNatGatewaysInput{Filter: append(ownerFilters(owner, part),
		ec2types.Filter{Name: aws.String("state"), Values: states})})
	if err != nil {
		return nil, fmt.Errorf("finding NAT gateways of %s: %w", owner, err)
	}
	var nats []ec2types.NatGateway
	for _, n := range out.NatGateways {
		tags := fromEC2Tags(n.Tags)
		if tags[OwnerTag] == owner && (part == "" || tags[partTag] == part) {
			nats = append(nats, n)
		}
	}
	return nats, nil
}

// ensureRouteTable makes the kind ("public"/"private") route table with a
// default route through target and associates it with subnets.
func (c *Clients) ensureRouteTable(ctx context.Context, spec ClusterSpec, vpcID, kind string, target ec2types.Route, subnets []string) error {
	part := kind + "-rt"
	out, err := c.EC2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: ownerFilters(spec.Name, part)})
	if err != nil {
		return fmt.Errorf("finding %s route table of %s: %w", kind, spec.Name, err)
	}
	var rt ec2types.RouteTable
	if len(out.RouteTables) > 0 {
		rt = out.RouteTables[0]
		c.adopted(ctx, "route table", aws.ToString(rt.RouteTableId))
	} else {
		tags := c.tagSet(spec.Name, spec.Tags, part)
		tags["Name"] = spec.Name + "-" + kind
		created, err := c.EC2.CreateRouteTable(ctx, &ec2.CreateRouteTableInput{VpcId: aws.String(vpcID), TagSpecifications: ec2TagSpec(ec2types.ResourceTypeRouteTable, tags)})
		if err != nil {
			return fmt.Errorf("creating %s route table for %s: %w", kind, spec.Name, err)
		}
		rt = *created.RouteTable
	}
	id := aws.ToString(rt.RouteTableId)
	hasDefault := false
	for _, r := range rt.Routes {
		hasDefault = hasDefault || aws.ToString(r.DestinationCidrBlock) == "0.0.0.0/0"
	}
	if !hasDefault {
		if _, err := c.EC2.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: aws.String(id), DestinationCidrBlock: aws.String("0.0.0.0/0"),
			GatewayId: target.GatewayId, NatGatewayId: target.NatGatewayId}); err != nil {
			return fmt.Errorf("adding default route to %s route table %s: %w", kind, id, err)
		}
	}
	associated := map[string]bool{}
	for _, a := range rt.Associations {
		associated[aws.ToString(a.SubnetId)] = true
	}
	for _, sn := range subnets {
		if associated[sn] {
			continue
		}
		if _, err := c.EC2.AssociateRouteTable(ctx, &ec2.AssociateRouteTableInput{RouteTableId: aws.String(id), SubnetId: aws.String(sn)}); err != nil {
			return fmt.Errorf("associating %s route table %s with subnet %s: %w", kind, id, sn, err)
		}
	}
	return nil
}

// existingNetwork describes a network the cluster was given: the zones come
// from the subnets, so preflight and node groups see the same zones.
func (c *Clients) existingNetwork(ctx context.Context, n NetworkSpec) (Network, error) {
	out, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: n.SubnetIDs})
	if err != nil {
		return Network{}, fmt.Errorf("networking.subnet_ids: describing subnets %v: %w", n.SubnetIDs, err)
	}
	net := Network{VPCID: n.VPCID, PrivateSubnetIDs: n.SubnetIDs}
	zones := map[string]bool{}
	for _, sn := range out.Subnets {
		if aws.ToString(sn.VpcId) != n.VPCID {
			return net, fmt.Errorf("networking.subnet_ids: subnet %s is in VPC %s, not networking.vpc_id %s", aws.ToString(sn.SubnetId), aws.ToString(sn.VpcId), n.VPCID)
		}
		zones[aws.ToString(sn.AvailabilityZone)] = true
	}
	for z := range zones {
		net.AvailabilityZones = append(net.AvailabilityZones, z)
	}
	sort.Strings(net.AvailabilityZones)
	vpcs, err := c.EC2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{n.VPCID}})
	if err != nil {
		return net, fmt.Errorf("networking.vpc_id: describing VPC %s: %w", n.VPCID, err)
	}
	if len(vpcs.Vpcs) > 0 {
		net.VPCCIDR = aws.ToString(vpcs.Vpcs[0].CidrBlock)
	}
	return net, nil
}

// findNetwork reads the network of a cluster back: the owned network by its
// tags, a given one from the cluster's own subnet list.
func (c *Clients) findNetwork(ctx context.Context, owner, vpcID string, clusterSubnets []string) (Network, error) {
	vpcs, err := c.EC2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{vpcID}})
	if err != nil {
		return Network{}, fmt.Errorf("describing VPC %s: %w", vpcID, err)
	}
	if len(vpcs.Vpcs) == 0 {
		return Network{}, fmt.Errorf("VPC %s of cluster %s is gone", vpcID, owner)
	}
	vpc := vpcs.Vpcs[0]
	if fromEC2Tags(vpc.Tags)[OwnerTag] != owner {
		return c.existingNetwork(ctx, NetworkSpec{VPCID: vpcID, SubnetIDs: clusterSubnets})
	}
	net := Network{VPCID: vpcID, VPCCIDR: aws.ToString(vpc.CidrBlock), Owned: true}
	out, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: ownerFilters(owner, "")})
	if err != nil {
		return net, fmt.Errorf("finding subnets of %s: %w", owner, err)
	}
	sort.Slice(out.Subnets, func(i, j int) bool {
		return aws.ToString(out.Subnets[i].AvailabilityZone) < aws.ToString(out.Subnets[j].AvailabilityZone)
	})
	for _, sn := range out.Subnets {
		part := fromEC2Tags(sn.Tags)[partTag]
		switch {
		case strings.HasPrefix(part, "private-"):
			net.PrivateSubnetIDs = append(net.PrivateSubnetIDs, aws.ToString(sn.SubnetId))
			net.AvailabilityZones = append(net.AvailabilityZones, aws.ToString(sn.AvailabilityZone))
		case strings.HasPrefix(part, "public-"):
			net.PublicSubnetIDs = append(net.PublicSubnetIDs, aws.ToString(sn.SubnetId))
		}
	}
	return net, nil
}

// vpcOf finds the VPC of a cluster whose description lacks it: from its
// subnets, else the owned VPC.
func (c *Clients) vpcOf(ctx context.Context, owner string, subnets []string) (string, error) {
	if len(subnets) > 0 {
		out, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: subnets[:1]})
		if err != nil {
			return "", fmt.Errorf("finding VPC of cluster %s from subnet %s: %w", owner, subnets[0], err)
		}
		if len(out.Subnets) > 0 {
			return aws.ToString(out.Subnets[0].VpcId), nil
		}
	}
	out, err := c.EC2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: ownerFilters(owner, "vpc")})
	if err != nil {
		return "", fmt.Errorf("finding VPC of %s: %w", owner, err)
	}
	if len(out.Vpcs) == 0 {
		return "", fmt.Errorf("cluster %s reports no VPC and no VPC carries its owner tag", owner)
	}
	return aws.ToString(out.Vpcs[0].VpcId), nil
}
