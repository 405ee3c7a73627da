package awsinfra

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Fallbacks of a node group on a capacity reservation: what its instances
// beyond the reservation's free count do.
const (
	// FallbackNone: they fail to launch (launch template preference
	// capacity-reservations-only; a Capacity Block never falls back).
	FallbackNone = "none"
	// FallbackOnDemand: they run as On-Demand Instances (preference open).
	FallbackOnDemand = "on_demand"
)

// Capacity types of a managed node group (EKS CreateNodegroup capacityType).
const (
	CapacityOnDemand = "ON_DEMAND"
	CapacitySpot     = "SPOT"
	CapacityBlock    = "CAPACITY_BLOCK"
)

// CapacityReservationSpec is the reservation a node group runs in before
// anything else: one On-Demand Capacity Reservation or Capacity Block,
// named by ID or selected by Tags.
type CapacityReservationSpec struct {
	// ID is cr-...; empty until a selection by Tags is resolved.
	ID   string
	Tags map[string]string
	// Fallback is FallbackNone or FallbackOnDemand.
	Fallback string
	// Zone and Block are the resolved reservation's zone and whether it is a
	// Capacity Block; set by resolveReservation, never by the caller.
	Zone  string
	Block bool
}

// CapacityReservation is what EC2 reports about one reservation.
type CapacityReservation struct {
	ID, InstanceType, Zone, State string
	Total, Available              int32
	// Block: a Capacity Block for ML (ReservationType capacity-block).
	Block bool
	// Targeted: only launches that name it run in it (InstanceMatchCriteria targeted).
	Targeted   bool
	Start, End time.Time
	Tags       map[string]string
}

func capacityReservationFrom(r ec2types.CapacityReservation) CapacityReservation {
	out := CapacityReservation{ID: aws.ToString(r.CapacityReservationId), InstanceType: aws.ToString(r.InstanceType), Zone: aws.ToString(r.AvailabilityZone),
		State: string(r.State), Total: aws.ToInt32(r.TotalInstanceCount), Available: aws.ToInt32(r.AvailableInstanceCount),
		Block: r.ReservationType == ec2types.CapacityReservationTypeCapacityBlock, Targeted: r.InstanceMatchCriteria == ec2types.InstanceMatchCriteriaTargeted,
		Tags: fromEC2Tags(r.Tags)}
	if r.StartDate != nil {
		out.Start = *r.StartDate
	}
	if r.EndDate != nil {
		out.End = *r.EndDate
	}
	return out
}

// String is "Capacity Reservation cr-x (g5.xlarge in us-west-2a, 2 of 4 free)".
func (r CapacityReservation) String() string {
	kind := "Capacity Reservation"
	if r.Block {
		kind = "Capacity Block"
	}
	return fmt.Sprintf("%s %s (%s in %s, %d of %d free)", kind, r.ID, r.InstanceType, r.Zone, r.Available, r.Total)
}

// FindCapacityReservations are the reservations a spec selects: the one its
// ID names (none when EC2 does not know it), or those carrying all its tags
// for the instance type, in a usable or upcoming state, most free first.
func (c *Clients) FindCapacityReservations(ctx context.Context, sel CapacityReservationSpec, instanceType string) ([]CapacityReservation, error) {
	in := &ec2.DescribeCapacityReservationsInput{}
	if sel.ID != "" {
		in.CapacityReservationIds = []string{sel.ID}
	} else {
		for _, k := range sortedKeys(sel.Tags) {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{sel.Tags[k]}})
		}
		in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("instance-type"), Values: []string{instanceType}},
			ec2types.Filter{Name: aws.String("state"), Values: []string{"active", "scheduled", "pending"}})
	}
	var out []CapacityReservation
	p := ec2.NewDescribeCapacityReservationsPaginator(c.EC2, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if isCode(err, "InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed") {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("describing EC2 capacity reservations: %w", err)
		}
		for _, r := range page.CapacityReservations {
			out = append(out, capacityReservationFrom(r))
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Available != out[j].Available {
			return out[i].Available > out[j].Available
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// resolveReservation fills in the GPU node group's reservation: its ID (a
// selection by tags takes the matching reservation with the most free
// instances), zone and kind. Preflight has checked the rest at plan time.
func (c *Clients) resolveReservation(ctx context.Context, ng *NodeGroupSpec) error {
	if ng.Reservation == nil {
		return nil
	}
	found, err := c.FindCapacityReservations(ctx, *ng.Reservation, ng.InstanceType)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return fmt.Errorf("gpu_node_group.capacity_reservation: %s matches no Capacity Reservation in %s", ng.Reservation.selection(), c.Config.Region)
	}
	r := *ng.Reservation
	r.ID, r.Zone, r.Block = found[0].ID, found[0].Zone, found[0].Block
	ng.Reservation = &r
	return nil
}

// selection names how a spec selects its reservation, for messages.
func (s CapacityReservationSpec) selection() string {
	if s.ID != "" {
		return "id " + s.ID
	}
	var kv []string
	for _, k := range sortedKeys(s.Tags) {
		kv = append(kv, k+"="+s.Tags[k])
	}
	return "tags " + strings.Join(kv, ", ")
}

// reservationSubnets keeps the subnets in the reservation's zone: a
// reservation serves one zone, and an instance cannot launch into a Capacity
// Block from a subnet in another (EC2 user guide "Launch instances using
// Capacity Blocks", Requirements); spread over other zones, the node group's
// Auto Scaling group would put instances outside the reservation.
func (c *Clients) reservationSubnets(ctx context.Context, ng NodeGroupSpec, subnets []string) ([]string, error) {
	if ng.Reservation == nil || ng.Reservation.Zone == "" || len(subnets) == 0 {
		return subnets, nil
	}
	out, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: subnets})
	if err != nil {
		return nil, fmt.Errorf("describing subnets of node group %s: %w", ng.Name, err)
	}
	var kept []string
	for _, sn := range out.Subnets {
		if aws.ToString(sn.AvailabilityZone) == ng.Reservation.Zone {
			kept = append(kept, aws.ToString(sn.SubnetId))
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("node group %s: no subnet of the cluster is in %s, the zone of capacity reservation %s; add that zone to networking.availability_zones",
			ng.Name, ng.Reservation.Zone, ng.Reservation.ID)
	}
	slices.Sort(kept)
	return kept, nil
}

// checkReservation checks the GPU node group's reservation before anything
// is made: it exists, serves the instance type in a zone of the cluster,
// is usable now (a Capacity Block only inside its window), matches the
// capacity type EKS requires, and has room for what the node group asks;
// when it has not, the finding or warning says what happens to the rest.
func (c *Clients) checkReservation(ctx context.Context, in PreflightInput, zones []string, res *PreflightResult) error {
	sel := in.GPU.Reservation
	if sel == nil {
		return nil
	}
	const field = "gpu_node_group.capacity_reservation"
	found, err := c.FindCapacityReservations(ctx, *sel, in.GPU.InstanceType)
	if err != nil {
		if isNotImplemented(err) || isCode(err, "UnauthorizedOperation") {
			res.Skipped = append(res.Skipped, fmt.Sprintf("capacity reservation (%s): EC2 DescribeCapacityReservations did not answer (%s)", sel.selection(), errorMessage(err)))
			return nil
		}
		return err
	}
	if len(found) == 0 {
		if sel.ID != "" {
			res.Findings = append(res.Findings, Finding{field + ".id", fmt.Sprintf("EC2 knows no Capacity Reservation %s in %s (owned by or shared with this account): check the id with `aws ec2 describe-capacity-reservations`", sel.ID, c.Config.Region)})
		} else {
			res.Findings = append(res.Findings, Finding{field + ".tags", fmt.Sprintf("no active or scheduled %s Capacity Reservation in %s carries %s: tag the reservation, or name it by id", in.GPU.InstanceType, c.Config.Region, sel.selection())})
		}
		return nil
	}
	r := found[0]
	res.CapacityReservationID = r.ID
	if len(found) > 1 {
		res.Warnings = append(res.Warnings, Finding{field + ".tags", fmt.Sprintf("%d reservations carry %s; the node group uses %s, the one with the most free instances", len(found), sel.selection(), r)})
	}
	fail := func(f, msg string, args ...any) {
		res.Findings = append(res.Findings, Finding{f, fmt.Sprintf(msg, args...)})
	}
	if r.InstanceType != in.GPU.InstanceType {
		fail("gpu_node_group.instance_type", "%s reserves %s, not %s: set instance_type = %q, or choose another reservation", r, r.InstanceType, in.GPU.InstanceType, r.InstanceType)
	}
	if len(zones) > 0 && !slices.Contains(zones, r.Zone) {
		fail("networking.availability_zones", "%s is in %s, which the cluster's zones (%s) leave out: add %s", r, r.Zone, strings.Join(zones, ", "), r.Zone)
	}
	storageZone := in.StorageZone
	if storageZone == "" && in.StorageOn && len(zones) > 0 {
		storageZone = slices.Min(zones)
	}
	if storageZone != "" && in.GPU.ColocateWithStorage && storageZone != r.Zone {
		fail("model_storage.availability_zone", "the GPU nodes are colocated with the file system in %s but %s is in %s: set model_storage.availability_zone = %q, or gpu_node_group.colocate_with_storage = false",
			storageZone, r, r.Zone, r.Zone)
	}
	want := CapacityOnDemand
	if r.Block {
		want = CapacityBlock
	}
	if in.GPU.CapacityType != want {
		fail("gpu_node_group.capacity_type", "%s needs capacity_type = %q (EKS runs a node group in a Capacity Block only with capacity type CAPACITY_BLOCK, and reservations hold On-Demand capacity), got %q",
			r, want, in.GPU.CapacityType)
	}
	if launcher := nodePoolLauncher(in); launcher != "" {
		nodePoolReservationChecks(launcher, r, sel, in.GPU, res)
		return nil
	}
	if r.Block && sel.Fallback == FallbackOnDemand {
		fail(field+".fallback", "%s cannot fall back to On-Demand (its instances run only inside the block): set fallback = \"none\"", r)
	}
	if !r.Block && r.Targeted && sel.Fallback == FallbackOnDemand {
		fail(field+".fallback", "%s accepts only launches that name it (instance eligibility targeted), and a launch that names a reservation cannot fall back to On-Demand: "+
			"set fallback = \"none\", or make the reservation open (aws ec2 modify-capacity-reservation --capacity-reservation-id %s --instance-match-criteria open)", r, r.ID)
	}
	now := time.Now()
	asked := in.GPU.DesiredSize
	switch {
	case r.Block && (r.State == "scheduled" || r.State == "payment-pending" || (!r.Start.IsZero() && now.Before(r.Start))):
		if asked > 0 || in.GPU.MinSize > 0 {
			fail("gpu_node_group.desired_size", "%s opens at %s and closes at %s; before then no instance launches into it: set desired_size and min_size to 0 until it opens, then raise them (or apply after %s)",
				r, r.Start.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339), r.Start.UTC().Format(time.RFC3339))
		}
		return nil
	case r.State != "active":
		fail(field, "%s is %s%s; instances launch only into an active reservation: choose another reservation, or drop capacity_reservation", r, r.State, closedAt(r))
		return nil
	}
	free := r.Available
	if asked > free {
		if sel.Fallback == FallbackOnDemand {
			res.Warnings = append(res.Warnings, Finding{"gpu_node_group.desired_size", fmt.Sprintf(
				"%s has room for %d of the %d instances asked (desired_size): %d will run as On-Demand Instances outside it, at On-Demand prices (fallback = \"on_demand\")",
				r, free, asked, asked-free)})
		} else {
			fail("gpu_node_group.desired_size", "%s has room for %d of the %d instances asked (desired_size), and with fallback = \"none\" the other %d fail to launch (InsufficientInstanceCapacity): "+
				"lower desired_size to %d%s, or free instances in the reservation", r, free, asked, asked-free, free, onDemandFix(r))
		}
	} else if in.GPU.MaxSize > free {
		what := "fail to launch (fallback = \"none\")"
		if sel.Fallback == FallbackOnDemand {
			what = "run as On-Demand Instances (fallback = \"on_demand\")"
		}
		res.Warnings = append(res.Warnings, Finding{"gpu_node_group.max_size", fmt.Sprintf("%s has room for %d instances; scaled up to max_size %d, the node group's instances beyond %d %s", r, free, in.GPU.MaxSize, free, what)})
	}
	if r.Block && !r.End.IsZero() {
		res.Warnings = append(res.Warnings, Finding{field, fmt.Sprintf("%s closes at %s: EC2 terminates its instances then; scale the node group to 0 before it closes", r, r.End.UTC().Format(time.RFC3339))})
	}
	return nil
}

// nodePoolLauncher names what launches the GPU nodes from a NodePool
// (Karpenter, EKS Auto Mode); "" for the GPU node group.
func nodePoolLauncher(in PreflightInput) string {
	switch {
	case in.Karpenter:
		return "Karpenter"
	case in.AutoMode:
		return "EKS Auto Mode"
	}
	return ""
}

// nodePoolReservationChecks say what the launcher (Karpenter, or EKS Auto
// Mode, which runs Karpenter's NodePools) does with the reservation: it
// launches each node into it while it has room (capacity type reserved)
// and, beyond, an On-Demand node where fallback allows (a launch of its
// own, so a targeted reservation or a Capacity Block may fall back too) or
// none, leaving the pod Pending. Nothing here is fixed in size, so a
// reservation smaller than max_size warns rather than fails.
func nodePoolReservationChecks(launcher string, r CapacityReservation, sel *CapacityReservationSpec, ng NodeGroupSpec, res *PreflightResult) {
	const field = "gpu_node_group.capacity_reservation"
	beyond := launcher + " launches none (fallback = \"none\"): the fleet's pods beyond them stay Pending until the reservation has room"
	if sel.Fallback == FallbackOnDemand {
		beyond = launcher + " launches On-Demand nodes, at On-Demand prices (fallback = \"on_demand\")"
	}
	warn := func(f, msg string, args ...any) {
		res.Warnings = append(res.Warnings, Finding{f, fmt.Sprintf(msg, args...)})
	}
	now := time.Now()
	switch {
	case r.Block && (r.State == "scheduled" || r.State == "payment-pending" || (!r.Start.IsZero() && now.Before(r.Start))):
		warn(field, "%s opens at %s: until then %s", r, r.Start.UTC().Format(time.RFC3339), beyond)
	case r.State != "active":
		res.Findings = append(res.Findings, Finding{field, fmt.Sprintf("%s is %s%s; instances launch only into an active reservation: choose another reservation, or drop capacity_reservation", r, r.State, closedAt(r))})
		return
	case r.Available < ng.MaxSize:
		warn("gpu_node_group.max_size", "%s has room for %d instances: %s launches its first %d nodes into it; beyond them, up to max_size %d, %s", r, r.Available, launcher, r.Available, ng.MaxSize, beyond)
	}
	if r.Block && !r.End.IsZero() {
		warn(field, "%s closes at %s: EC2 terminates its instances then, and %s", r, r.End.UTC().Format(time.RFC3339), beyond)
	}
}

func closedAt(r CapacityReservation) string {
	if !r.End.IsZero() {
		return " since " + r.End.UTC().Format(time.RFC3339)
	}
	return ""
}

// onDemandFix offers the On-Demand fallback where a reservation allows one.
func onDemandFix(r CapacityReservation) string {
	if r.Block || r.Targeted {
		return ""
	}
	return ", set capacity_reservation.fallback = \"on_demand\""
}
