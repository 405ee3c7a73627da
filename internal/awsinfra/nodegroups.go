package awsinfra

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// findNodeGroupByName describes a node group; nil without error when it does not exist.
func (c *Clients) findNodeGroupByName(ctx context.Context, cluster, name string) (*NodeGroup, error) {
	out, err := c.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(name)})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describing EKS node group %s: %w", name, err)
	}
	ng := nodeGroupFrom(out.Nodegroup)
	if lt := out.Nodegroup.LaunchTemplate; lt != nil {
		if err := c.readLaunchTemplate(ctx, ng, lt); err != nil {
			return nil, err
		}
	}
	return ng, nil
}

func nodeGroupFrom(ng *ekstypes.Nodegroup) *NodeGroup {
	out := &NodeGroup{ARN: aws.ToString(ng.NodegroupArn), Status: string(ng.Status), Tags: ng.Tags}
	out.Name = aws.ToString(ng.NodegroupName)
	if len(ng.InstanceTypes) > 0 {
		out.InstanceType = ng.InstanceTypes[0]
	}
	out.Version = aws.ToString(ng.Version)
	out.ReleaseVersion = aws.ToString(ng.ReleaseVersion)
	out.NodeRoleARN = aws.ToString(ng.NodeRole)
	out.Subnets = slices.Clone(ng.Subnets)
	out.AMIType = string(ng.AmiType)
	out.CapacityType = string(ng.CapacityType)
	out.DiskSize = aws.ToInt32(ng.DiskSize)
	if s := ng.ScalingConfig; s != nil {
		out.DesiredSize, out.MinSize, out.MaxSize = aws.ToInt32(s.DesiredSize), aws.ToInt32(s.MinSize), aws.ToInt32(s.MaxSize)
	}
	out.Labels = maps.Clone(ng.Labels)
	for _, t := range ng.Taints {
		out.Taints = append(out.Taints, Taint{Key: aws.ToString(t.Key), Value: aws.ToString(t.Value), Effect: string(t.Effect)})
	}
	sortTaints(out.Taints)
	return out
}

func sortTaints(ts []Taint) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Key+"\x00"+ts[i].Effect < ts[j].Key+"\x00"+ts[j].Effect })
}

func ekstaints(ts []Taint) []ekstypes.Taint {
	out := make([]ekstypes.Taint, 0, len(ts))
	for _, t := range ts {
		out = append(out, ekstypes.Taint{Key: aws.String(t.Key), Value: aws.String(t.Value), Effect: ekstypes.TaintEffect(t.Effect)})
	}
	return out
}

// ensureNodeGroup creates the node group or adopts the one an earlier create
// left, waits for it to be ACTIVE and brings its updatable settings (scaling,
// labels, taints, tags) to the spec.
func (c *Clients) ensureNodeGroup(ctx context.Context, spec ClusterSpec, ngs NodeGroupSpec, subnets []string, nodeRoleARN string) error {
	have, err := c.findNodeGroupByName(ctx, spec.Name, ngs.Name)
	if err != nil {
		return err
	}
	if have != nil {
		c.adopted(ctx, "EKS node group", ngs.Name)
		if have.Status == string(ekstypes.NodegroupStatusCreateFailed) {
			return fmt.Errorf("EKS node group %s of cluster %s is CREATE_FAILED%s; delete it (aws eks delete-nodegroup --cluster-name %s --nodegroup-name %s) and apply again",
				ngs.Name, spec.Name, nodeGroupIssuesOf(ctx, c, spec.Name, ngs.Name), spec.Name, ngs.Name)
		}
	} else {
		in := &eks.CreateNodegroupInput{
			ClusterName:   aws.String(spec.Name),
			NodegroupName: aws.String(ngs.Name),
			NodeRole:      aws.String(nodeRoleARN),
			Version:       aws.String(spec.KubernetesVersion),
			Subnets:       subnets,
			InstanceTypes: []string{ngs.InstanceType},
			AmiType:       ekstypes.AMITypes(ngs.AMIType),
			CapacityType:  ekstypes.CapacityTypes(ngs.CapacityType),
			ScalingConfig: &ekstypes.NodegroupScalingConfig{DesiredSize: aws.Int32(ngs.DesiredSize), MinSize: aws.Int32(ngs.MinSize), MaxSize: aws.Int32(ngs.MaxSize)},
			Labels:        ngs.Labels,
			Taints:        ekstaints(ngs.Taints),
			Tags:          c.tagSet(spec.Name, spec.Tags, "nodegroup-"+ngs.Name),
		}
		if ngs.Reservation == nil {
			in.DiskSize = aws.Int32(ngs.DiskSize)
		} else if in.LaunchTemplate, err = c.ensureLaunchTemplate(ctx, spec, ngs); err != nil {
			return err
		}
		err := c.createRetryingIAM(ctx, "IAM role "+nodeRoleARN+" to be usable by EKS node group "+ngs.Name, func(ctx context.Context) error {
			_, err := c.EKS.CreateNodegroup(ctx, in)
			return err
		})
		if err != nil {
			return fmt.Errorf("creating EKS node group %s: %w", ngs.Name, err)
		}
	}
	if err := c.waitNodeGroupActive(ctx, spec.Name, ngs.Name); err != nil {
		return err
	}
	if have == nil {
		return nil
	}
	return c.updateNodeGroup(ctx, spec, ngs, have)
}

// waitNodeGroupActive waits through CREATING and UPDATING; CREATE_FAILED and
// DEGRADED end the wait with the health issue codes EKS reports.
func (c *Clients) waitNodeGroupActive(ctx context.Context, cluster, name string) error {
	return c.waitFor(ctx, "EKS node group "+name+" to become ACTIVE", func(ctx context.Context) error {
		out, err := c.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(name)})
		if isNotFound(err) {
			return pending("not found yet")
		}
		if err != nil {
			return fmt.Errorf("describing EKS node group %s: %w", name, err)
		}
		switch st := out.Nodegroup.Status; st {
		case ekstypes.NodegroupStatusActive:
			return nil
		case ekstypes.NodegroupStatusCreating, ekstypes.NodegroupStatusUpdating:
			return pending("status %s", st)
		default:
			return fmt.Errorf("EKS node group %s is %s%s%s", name, st, nodeGroupIssues(out.Nodegroup.Health), c.capacityAdvice(ctx, out.Nodegroup))
		}
	})
}

// capacityAdvice says what to do when a node group failed because EC2 had
// no instances of its type in its zones (health issue
// AsgInstanceLaunchFailures with InsufficientInstanceCapacity, the
// commonest failure of a first GPU apply; EKS user guide "Troubleshoot
// managed node groups"); "" for any other failure.
func (c *Clients) capacityAdvice(ctx context.Context, ng *ekstypes.Nodegroup) string {
	found := false
	if ng.Health != nil {
		for _, i := range ng.Health.Issues {
			found = found || (i.Code == ekstypes.NodegroupIssueCodeAsgInstanceLaunchFailures && strings.Contains(aws.ToString(i.Message), "InsufficientInstanceCapacity"))
		}
	}
	if !found {
		return ""
	}
	zones := "its zones"
	if out, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: ng.Subnets}); err == nil {
		var zs []string
		for _, sn := range out.Subnets {
			zs = append(zs, aws.ToString(sn.AvailabilityZone))
		}
		slices.Sort(zs)
		zones = strings.Join(slices.Compact(zs), ", ")
	}
	if r := c.reservationOf(ctx, ng); r != "" {
		return fmt.Sprintf(".\n\nThe node group launches into %s and EC2 had no room there for every instance (InsufficientInstanceCapacity). "+
			"Lower gpu_node_group.desired_size to the reservation's free count, set gpu_node_group.capacity_reservation.fallback = \"on_demand\" "+
			"(On-Demand Capacity Reservations that are open only), or, for a Capacity Block, apply again inside its window", r)
	}
	return fmt.Sprintf(".\n\nEC2 has no %s capacity in %s right now (InsufficientInstanceCapacity). Put the node group in another zone "+
		"(model_storage.availability_zone moves a colocated GPU node group with the file system; networking.availability_zones chooses the zones of a created network), "+
		"reserve the instances with an On-Demand Capacity Reservation in that zone, or try again later", strings.Join(ng.InstanceTypes, ", "), zones)
}

func nodeGroupIssues(h *ekstypes.NodegroupHealth) string {
	if h == nil {
		return issuesText(0, nil)
	}
	return issuesText(len(h.Issues), func(i int) string {
		return issueText(string(h.Issues[i].Code), aws.ToString(h.Issues[i].Message), h.Issues[i].ResourceIds)
	})
}

// nodeGroupIssuesOf describes the node group again for its health issues.
func nodeGroupIssuesOf(ctx context.Context, c *Clients, cluster, name string) string {
	out, err := c.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(name)})
	if err != nil {
		return ""
	}
	return nodeGroupIssues(out.Nodegroup.Health)
}

// updateNodeGroup applies in place what EKS can change on a node group:
// scaling, labels, taints, tags, and the Kubernetes version after the
// control plane's upgrade.
func (c *Clients) updateNodeGroup(ctx context.Context, spec ClusterSpec, want NodeGroupSpec, have *NodeGroup) error {
	in := &eks.UpdateNodegroupConfigInput{ClusterName: aws.String(spec.Name), NodegroupName: aws.String(want.Name)}
	changed := false
	if want.DesiredSize != have.DesiredSize || want.MinSize != have.MinSize || want.MaxSize != have.MaxSize {
		in.ScalingConfig = &ekstypes.NodegroupScalingConfig{DesiredSize: aws.Int32(want.DesiredSize), MinSize: aws.Int32(want.MinSize), MaxSize: aws.Int32(want.MaxSize)}
		changed = true
	}
	if set, remove := tagDiff(have.Labels, want.Labels); len(set) > 0 || len(remove) > 0 {
		in.Labels = &ekstypes.UpdateLabelsPayload{AddOrUpdateLabels: set, RemoveLabels: remove}
		changed = true
	}
	if add, remove := taintDiff(have.Taints, want.Taints); len(add) > 0 || len(remove) > 0 {
		in.Taints = &ekstypes.UpdateTaintsPayload{AddOrUpdateTaints: ekstaints(add), RemoveTaints: ekstaints(remove)}
		changed = true
	}
	settled := func(ctx context.Context) error { return c.waitNodeGroupSettled(ctx, spec.Name, want.Name) }
	if changed {
		var out *eks.UpdateNodegroupConfigOutput
		err := c.whileInUse(ctx, "EKS node group "+want.Name+" (update)", func(ctx context.Context) (err error) {
			out, err = c.EKS.UpdateNodegroupConfig(ctx, in)
			return err
		}, settled)
		if err != nil {
			return fmt.Errorf("updating EKS node group %s: %w", want.Name, err)
		}
		if err := c.waitUpdate(ctx, updateTarget{cluster: spec.Name, nodegroup: want.Name}, out.Update); err != nil {
			return err
		}
		if err := c.waitNodeGroupActive(ctx, spec.Name, want.Name); err != nil {
			return err
		}
	}
	if have.Version != "" && have.Version != spec.KubernetesVersion {
		var out *eks.UpdateNodegroupVersionOutput
		err := c.whileInUse(ctx, "EKS node group "+want.Name+" (version update)", func(ctx context.Context) (err error) {
			out, err = c.EKS.UpdateNodegroupVersion(ctx, &eks.UpdateNodegroupVersionInput{ClusterName: aws.String(spec.Name), NodegroupName: aws.String(want.Name),
				Version: aws.String(spec.KubernetesVersion)})
			return err
		}, settled)
		if err != nil {
			return fmt.Errorf("upgrading EKS node group %s from %s to %s: %w", want.Name, have.Version, spec.KubernetesVersion, err)
		}
		if err := c.waitUpdate(ctx, updateTarget{cluster: spec.Name, nodegroup: want.Name}, out.Update); err != nil {
			return err
		}
		if err := c.waitNodeGroupActive(ctx, spec.Name, want.Name); err != nil {
			return err
		}
	}
	return c.syncEKSTags(ctx, have.ARN, have.Tags, c.tagSet(spec.Name, spec.Tags, "nodegroup-"+want.Name))
}

// taintDiff is which taints to add or update and which to remove, keyed as EKS keys them (key and effect).
func taintDiff(have, want []Taint) (add, remove []Taint) {
	key := func(t Taint) string { return t.Key + "\x00" + t.Effect }
	haveBy := map[string]Taint{}
	for _, t := range have {
		haveBy[key(t)] = t
	}
	wantBy := map[string]bool{}
	for _, t := range want {
		wantBy[key(t)] = true
		if h, ok := haveBy[key(t)]; !ok || h.Value != t.Value {
			add = append(add, t)
		}
	}
	for _, t := range have {
		if !wantBy[key(t)] {
			remove = append(remove, t)
		}
	}
	return add, remove
}

// nodeGroupsOf splits the cluster's node groups into those carrying its owner
// tag and the others.
func (c *Clients) nodeGroupsOf(ctx context.Context, cluster string) (owned, foreign []string, err error) {
	p := eks.NewListNodegroupsPaginator(c.EKS, &eks.ListNodegroupsInput{ClusterName: aws.String(cluster)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("listing node groups of EKS cluster %s: %w", cluster, err)
		}
		for _, name := range page.Nodegroups {
			ng, err := c.findNodeGroupByName(ctx, cluster, name)
			if err != nil {
				return nil, nil, err
			}
			switch {
			case ng == nil, ng.Status == string(ekstypes.NodegroupStatusDeleting):
				// Going already: DeleteCluster waits for it.
			case ng.Tags[OwnerTag] == cluster:
				owned = append(owned, name)
			default:
				foreign = append(foreign, name)
			}
		}
	}
	return owned, foreign, nil
}

// deleteNodeGroup deletes the node group and waits until it is gone; one
// already gone is done, DELETE_FAILED ends the wait with its health issues.
// EKS refuses the delete while an update of the group runs
// (ResourceInUseException): the call is repeated once the group is ready.
// Right after the call the group can still read ACTIVE (or the state it
// had), pending for settleLimit (terraform-provider-aws eks/node_group.go
// waitNodegroupDeleted waits through ACTIVE and DELETING).
func (c *Clients) deleteNodeGroup(ctx context.Context, cluster, name string) error {
	began := time.Now()
	err := c.whileInUse(ctx, "EKS node group "+name+" (delete)", func(ctx context.Context) error {
		_, err := c.EKS.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(name)})
		return err
	}, func(ctx context.Context) error { return c.waitNodeGroupSettled(ctx, cluster, name) })
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting EKS node group %s: %w", name, err)
	}
	return c.waitFor(ctx, "EKS node group "+name+" to be deleted", func(ctx context.Context) error {
		out, err := c.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(name)})
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("describing EKS node group %s: %w", name, err)
		}
		switch st := out.Nodegroup.Status; {
		case st == ekstypes.NodegroupStatusDeleting || settling(began):
			return pending("status %s", st)
		default:
			return fmt.Errorf("EKS node group %s is %s while being deleted%s", name, st, nodeGroupIssues(out.Nodegroup.Health))
		}
	})
}

// waitNodeGroupsGone waits until the cluster lists no node group: EKS
// refuses to delete a cluster while any is left, DELETING ones included.
func (c *Clients) waitNodeGroupsGone(ctx context.Context, cluster string) error {
	return c.waitFor(ctx, "EKS cluster "+cluster+" to have no node groups left", func(ctx context.Context) error {
		out, err := c.EKS.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: aws.String(cluster)})
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing node groups of EKS cluster %s: %w", cluster, err)
		}
		var left []string
		for _, name := range out.Nodegroups {
			ng, err := c.findNodeGroupByName(ctx, cluster, name)
			if err != nil {
				return err
			}
			if ng != nil {
				left = append(left, name+" ("+ng.Status+")")
			}
		}
		if len(left) > 0 {
			return pending("node groups %s", strings.Join(left, ", "))
		}
		return nil
	})
}

// waitNodeGroupSettled waits until an update of the node group is over,
// whatever its outcome, so EKS takes the next call.
func (c *Clients) waitNodeGroupSettled(ctx context.Context, cluster, name string) error {
	return c.waitFor(ctx, "EKS node group "+name+" to finish its update", func(ctx context.Context) error {
		ng, err := c.findNodeGroupByName(ctx, cluster, name)
		if err != nil || ng == nil {
			return err
		}
		if ng.Status == string(ekstypes.NodegroupStatusUpdating) || ng.Status == string(ekstypes.NodegroupStatusCreating) {
			return pending("status %s", ng.Status)
		}
		return nil
	})
}

// reservationOf describes the reservation a failed node group launches
// into, "" for none.
func (c *Clients) reservationOf(ctx context.Context, ng *ekstypes.Nodegroup) string {
	if ng.LaunchTemplate == nil {
		return ""
	}
	have := &NodeGroup{}
	have.Name = aws.ToString(ng.NodegroupName)
	if c.readLaunchTemplate(ctx, have, ng.LaunchTemplate) != nil || have.Reservation == nil {
		return ""
	}
	found, err := c.FindCapacityReservations(ctx, CapacityReservationSpec{ID: have.Reservation.ID}, "")
	if err != nil || len(found) == 0 {
		return "capacity reservation " + have.Reservation.ID
	}
	r := found[0]
	out := r.String()
	if r.Block && r.State != "active" {
		out += fmt.Sprintf(", which is %s (window %s to %s)", r.State, r.Start.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339))
	}
	return out
}
