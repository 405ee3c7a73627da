package awsinfra

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// dependencyCodes are the answers EC2 gives while something still uses a part
// (ENIs that EKS or load balancers leave for minutes, a NAT gateway releasing
// its address); they pass with time, so deletes retry them.
var dependencyCodes = []string{"DependencyViolation", "InvalidIPAddress.InUse"}

// deleteRetrying runs del until it succeeds, finds the part gone, or fails with
// something other than a lingering dependency.
func (c *Clients) deleteRetrying(ctx context.Context, what string, del func(context.Context) error) error {
	return c.waitFor(ctx, what+" to be deleted", func(ctx context.Context) error {
		err := del(ctx)
		switch {
		case err == nil || isNotFound(err):
			return nil
		case isCode(err, dependencyCodes...):
			msg := errorMessage(err)
			var left *leftoverError
			if errors.As(err, &left) {
				msg += "; " + left.left
			}
			return pending("%s", msg)
		default:
			return err
		}
	})
}

// deleteNetwork removes every EC2 part tagged with owner, in dependency order.
// It finds parts by tag rather than from state, so it cleans up after a create
// that never recorded them, and a part already gone is simply not found.
func (c *Clients) deleteNetwork(ctx context.Context, owner string) error {
	if err := c.deleteNATGateways(ctx, owner); err != nil {
		return err
	}
	vpcs, err := c.EC2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: ownerFilters(owner, "vpc")})
	if err != nil {
		return fmt.Errorf("finding VPC of %s: %w", owner, err)
	}
	jobs := []func() error{
		func() error { return c.releaseAddresses(ctx, owner) },
		func() error { return c.deleteInternetGateways(ctx, owner) },
		func() error { return c.deleteRouteTables(ctx, owner) },
	}
	// Only in the VPC this cluster created: a VPC the user brought keeps
	// everything in it.
	for _, vpc := range vpcs.Vpcs {
		jobs = append(jobs, func() error { return c.deleteVPCLeftovers(ctx, aws.ToString(vpc.VpcId)) })
	}
	if err := parallel(jobs...); err != nil {
		return err
	}
	subnets, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: ownerFilters(owner, "")})
	if err != nil {
		return fmt.Errorf("finding subnets of %s: %w", owner, err)
	}
	jobs = []func() error{}
	for _, sn := range subnets.Subnets {
		id := sn.SubnetId
		jobs = append(jobs, func() error {
			return c.deleteRetrying(ctx, "subnet "+*id, func(ctx context.Context) error {
				_, err := c.EC2.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: id})
				return c.withLeftovers(ctx, err, "subnet-id", *id)
			})
		})
	}
	if err := parallel(jobs...); err != nil {
		return err
	}
	for _, vpc := range vpcs.Vpcs {
		if err := c.deleteVPC(ctx, aws.ToString(vpc.VpcId)); err != nil {
			return err
		}
	}
	return nil
}

func (c *Clients) deleteNATGateways(ctx context.Context, owner string) error {
	nats, err := c.findNATGateways(ctx, owner, "", "pending", "available", "deleting", "failed")
	if err != nil {
		return err
	}
	for _, nat := range nats {
		id := aws.ToString(nat.NatGatewayId)
		if _, err := c.EC2.DeleteNatGateway(ctx, &ec2.DeleteNatGatewayInput{NatGatewayId: aws.String(id)}); err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting NAT gateway %s: %w", id, err)
		}
		err := c.waitFor(ctx, "NAT gateway "+id+" to be deleted", func(ctx context.Context) error {
			out, err := c.EC2.DescribeNatGateways(ctx, &ec2.DescribeNatGatewaysInput{NatGatewayIds: []string{id}})
			if isNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			if len(out.NatGateways) == 0 || out.NatGateways[0].State == ec2types.NatGatewayStateDeleted {
				return nil
			}
			return pending("state %s", out.NatGateways[0].State)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Clients) releaseAddresses(ctx context.Context, owner string) error {
	out, err := c.EC2.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: ownerFilters(owner, "")})
	if err != nil {
		return fmt.Errorf("finding elastic IPs of %s: %w", owner, err)
	}
	for _, a := range out.Addresses {
		id := a.AllocationId
		if err := c.deleteRetrying(ctx, "elastic IP "+aws.ToString(id), func(ctx context.Context) error {
			_, err := c.EC2.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: id})
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

func (c *Clients) deleteInternetGateways(ctx context.Context, owner string) error {
	out, err := c.EC2.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{Filters: ownerFilters(owner, "")})
	if err != nil {
		return fmt.Errorf("finding internet gateways of %s: %w", owner, err)
	}
	for _, igw := range out.InternetGateways {
		id := igw.InternetGatewayId
		for _, a := range igw.Attachments {
			// Detaching waits out public addresses still mapped in the VPC.
			if err := c.deleteRetrying(ctx, "attachment of internet gateway "+*id, func(ctx context.Context) error {
				_, err := c.EC2.DetachInternetGateway(ctx, &ec2.DetachInternetGatewayInput{InternetGatewayId: id, VpcId: a.VpcId})
				if isCode(err, "Gateway.NotAttached") {
					return nil
				}
				return err
			}); err != nil {
				return err
			}
		}
		if err := c.deleteRetrying(ctx, "internet gateway "+*id, func(ctx context.Context) error {
			_, err := c.EC2.DeleteInternetGateway(ctx, &ec2.DeleteInternetGatewayInput{InternetGatewayId: id})
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

func (c *Clients) deleteRouteTables(ctx context.Context, owner string) error {
	out, err := c.EC2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: ownerFilters(owner, "")})
	if err != nil {
		return fmt.Errorf("finding route tables of %s: %w", owner, err)
	}
	for _, rt := range out.RouteTables {
		for _, a := range rt.Associations {
			if aws.ToBool(a.Main) {
				continue
			}
			if _, err := c.EC2.DisassociateRouteTable(ctx, &ec2.DisassociateRouteTableInput{AssociationId: a.RouteTableAssociationId}); err != nil && !isNotFound(err) {
				return fmt.Errorf("disassociating route table %s: %w", aws.ToString(rt.RouteTableId), err)
			}
		}
		id := rt.RouteTableId
		if err := c.deleteRetrying(ctx, "route table "+*id, func(ctx context.Context) error {
			_, err := c.EC2.DeleteRouteTable(ctx, &ec2.DeleteRouteTableInput{RouteTableId: id})
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// deleteVPCLeftovers deletes what others leave in a VPC the cluster
// created and what keeps its subnets from going: the network interfaces the
// VPC CNI leaked when nodes went (status available: attached to nothing;
// aws/amazon-vpc-cni-k8s#1223, #608; EKS user guide "Delete a cluster") and
// VPC endpoints. Interfaces still in use belong to something running and are
// left to their owners (a timeout then names them).
func (c *Clients) deleteVPCLeftovers(ctx context.Context, vpcID string) error {
	enis, err := c.EC2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []ec2types.Filter{ec2Filter("vpc-id", vpcID)}})
	if err != nil {
		return fmt.Errorf("listing network interfaces of VPC %s: %w", vpcID, err)
	}
	for _, eni := range enis.NetworkInterfaces {
		if eni.Status != ec2types.NetworkInterfaceStatusAvailable {
			continue
		}
		c.logf(ctx, "deleting network interface left in the cluster's VPC", map[string]any{"id": aws.ToString(eni.NetworkInterfaceId), "description": aws.ToString(eni.Description)})
		if _, err := c.EC2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: eni.NetworkInterfaceId}); err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting network interface %s: %w", aws.ToString(eni.NetworkInterfaceId), err)
		}
	}
	eps, err := c.EC2.DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{Filters: []ec2types.Filter{ec2Filter("vpc-id", vpcID)}})
	if err != nil {
		return fmt.Errorf("listing VPC endpoints of VPC %s: %w", vpcID, err)
	}
	var ids []string
	for _, ep := range eps.VpcEndpoints {
		if !strings.EqualFold(string(ep.State), "deleted") && !strings.EqualFold(string(ep.State), "deleting") {
			ids = append(ids, aws.ToString(ep.VpcEndpointId))
		}
	}
	if len(ids) > 0 {
		if _, err := c.EC2.DeleteVpcEndpoints(ctx, &ec2.DeleteVpcEndpointsInput{VpcEndpointIds: ids}); err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting VPC endpoints %v of VPC %s: %w", ids, vpcID, err)
		}
	}
	return nil
}

// withLeftovers adds to a DependencyViolation what EC2 still holds in the
// part (network interfaces by the filter, e.g. subnet-id, and their status
// and description), so a delete that times out says what is left.
func (c *Clients) withLeftovers(ctx context.Context, err error, filter, id string) error {
	if !isCode(err, "DependencyViolation") {
		return err
	}
	out, lerr := c.EC2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []ec2types.Filter{ec2Filter(filter, id)}})
	if lerr != nil || len(out.NetworkInterfaces) == 0 {
		return err
	}
	var left []string
	for _, eni := range out.NetworkInterfaces {
		left = append(left, fmt.Sprintf("%s (%s, %q)", aws.ToString(eni.NetworkInterfaceId), eni.Status, aws.ToString(eni.Description)))
	}
	return &leftoverError{err: err, left: "network interfaces still in " + id + ": " + strings.Join(left, ", ")}
}

// leftoverError is a DependencyViolation with what is left in the part.
type leftoverError struct {
	err  error
	left string
}

func (e *leftoverError) Error() string { return e.err.Error() + "; " + e.left }
func (e *leftoverError) Unwrap() error { return e.err }

// deleteVPC removes security groups left in the VPC (EKS's cluster security
// group outlives the cluster for a while) and then the VPC itself.
func (c *Clients) deleteVPC(ctx context.Context, vpcID string) error {
	sgs, err := c.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("vpc-id"), Values: []string{vpcID}}}})
	if err != nil {
		return fmt.Errorf("listing security groups of VPC %s: %w", vpcID, err)
	}
	for _, sg := range sgs.SecurityGroups {
		if aws.ToString(sg.GroupName) == "default" {
			continue
		}
		id := sg.GroupId
		if err := c.deleteRetrying(ctx, "security group "+*id, func(ctx context.Context) error {
			_, err := c.EC2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: id})
			return c.withLeftovers(ctx, err, "group-id", *id)
		}); err != nil {
			return err
		}
	}
	return c.deleteRetrying(ctx, "VPC "+vpcID, func(ctx context.Context) error {
		_, err := c.EC2.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: aws.String(vpcID)})
		return c.withLeftovers(ctx, err, "vpc-id", vpcID)
	})
}
