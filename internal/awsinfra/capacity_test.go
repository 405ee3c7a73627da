package awsinfra

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// reservationFixtures are the reservations the capacity tests share: an open
// ODCR with 2 of 4 g5.xlarge free, a targeted one, a Capacity Block that
// opens tomorrow and one that is open now.
func reservationFixtures(standIn *testenv.AWSStandIn) {
	now := time.Now()
	for _, r := range []testenv.CapacityReservation{
		{ID: "cr-0open", InstanceType: "g5.xlarge", Zone: "us-west-2a", Total: 4, Available: 2, Tags: map[string]string{"pool": "llm"}},
		{ID: "cr-0targeted", InstanceType: "g5.xlarge", Zone: "us-west-2b", Total: 2, Available: 2, Targeted: true},
		{ID: "cr-0later", InstanceType: "g5.xlarge", Zone: "us-west-2a", Total: 4, Available: 4, Block: true, Start: now.Add(24 * time.Hour), End: now.Add(48 * time.Hour)},
		{ID: "cr-0now", InstanceType: "g5.xlarge", Zone: "us-west-2a", Total: 2, Available: 2, Block: true, Start: now.Add(-time.Hour), End: now.Add(23 * time.Hour)},
	} {
		standIn.AddCapacityReservation(r)
	}
}

// TestReservationPreflight: the plan-time checks of a GPU node group's
// reservation name the field and the fix, and say in words what a
// reservation too small for the node group does with the rest.
func TestReservationPreflight(t *testing.T) {
	c, standIn := standInClients(t)
	reservationFixtures(standIn)
	ctx := context.Background()
	check := func(label string, mutate func(*NodeGroupSpec), findings, warnings []string) {
		t.Helper()
		spec := testSpec("pf-cr")
		spec.GPU.DesiredSize, spec.GPU.MinSize, spec.GPU.MaxSize = 2, 1, 2
		mutate(&spec.GPU)
		res, err := c.Preflight(ctx, PreflightInput{KubernetesVersion: "1.33", GPU: spec.GPU, System: spec.System, Network: spec.Network})
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		var gotF, gotW []string
		for _, f := range res.Findings {
			gotF = append(gotF, f.Field+": "+f.Message)
		}
		for _, f := range res.Warnings {
			gotW = append(gotW, f.Field+": "+f.Message)
		}
		for _, group := range []struct {
			got, want []string
			what      string
		}{{gotF, findings, "findings"}, {gotW, warnings, "warnings"}} {
			if len(group.got) != len(group.want) {
				t.Errorf("%s: %s %q, want %d matching %q", label, group.what, group.got, len(group.want), group.want)
				continue
			}
			for i, w := range group.want {
				if !strings.Contains(group.got[i], w) {
					t.Errorf("%s: %s[%d] = %q, want it to contain %q", label, group.what, i, group.got[i], w)
				}
			}
		}
	}
	odcr := func(id, fallback string) func(*NodeGroupSpec) {
		return func(ng *NodeGroupSpec) { ng.Reservation = &CapacityReservationSpec{ID: id, Fallback: fallback} }
	}
	check("fits", odcr("cr-0open", FallbackNone), nil, nil)
	check("by tags, full, on-demand fallback", func(ng *NodeGroupSpec) {
		ng.DesiredSize, ng.MaxSize = 3, 3
		ng.Reservation = &CapacityReservationSpec{Tags: map[string]string{"pool": "llm"}, Fallback: FallbackOnDemand}
	}, nil, []string{`gpu_node_group.desired_size: Capacity Reservation cr-0open (g5.xlarge in us-west-2a, 2 of 4 free) has room for 2 of the 3 instances asked (desired_size): 1 will run as On-Demand Instances`})
	check("full, no fallback", func(ng *NodeGroupSpec) {
		ng.DesiredSize, ng.MaxSize = 3, 3
		ng.Reservation = &CapacityReservationSpec{ID: "cr-0open", Fallback: FallbackNone}
	}, []string{`gpu_node_group.desired_size: Capacity Reservation cr-0open (g5.xlarge in us-west-2a, 2 of 4 free) has room for 2 of the 3 instances asked (desired_size), and with fallback = "none" the other 1 fail to launch (InsufficientInstanceCapacity): lower desired_size to 2, set capacity_reservation.fallback = "on_demand"`}, nil)
	check("scale-out beyond", func(ng *NodeGroupSpec) {
		ng.MaxSize = 4
		ng.Reservation = &CapacityReservationSpec{ID: "cr-0open", Fallback: FallbackNone}
	},
		nil, []string{`gpu_node_group.max_size: Capacity Reservation cr-0open (g5.xlarge in us-west-2a, 2 of 4 free) has room for 2 instances; scaled up to max_size 4, the node group's instances beyond 2 fail to launch`})
	check("unknown id", odcr("cr-0nope", FallbackNone), []string{`gpu_node_group.capacity_reservation.id: EC2 knows no Capacity Reservation cr-0nope in us-west-2`}, nil)
	check("no tag match", func(ng *NodeGroupSpec) {
		ng.Reservation = &CapacityReservationSpec{Tags: map[string]string{"pool": "none"}, Fallback: FallbackNone}
	},
		[]string{`gpu_node_group.capacity_reservation.tags: no active or scheduled g5.xlarge Capacity Reservation in us-west-2 carries tags pool=none`}, nil)
	check("targeted with fallback", odcr("cr-0targeted", FallbackOnDemand),
		[]string{`gpu_node_group.capacity_reservation.fallback: Capacity Reservation cr-0targeted (g5.xlarge in us-west-2b, 2 of 2 free) accepts only launches that name it`}, nil)
	check("wrong type", func(ng *NodeGroupSpec) {
		ng.InstanceType = "g6.xlarge"
		ng.Reservation = &CapacityReservationSpec{ID: "cr-0open", Fallback: FallbackNone}
	},
		[]string{`gpu_node_group.instance_type: Capacity Reservation cr-0open (g5.xlarge in us-west-2a, 2 of 4 free) reserves g5.xlarge, not g6.xlarge: set instance_type = "g5.xlarge"`}, nil)
	check("block without its capacity type", odcr("cr-0now", FallbackNone),
		[]string{`gpu_node_group.capacity_type: Capacity Block cr-0now (g5.xlarge in us-west-2a, 2 of 2 free) needs capacity_type = "CAPACITY_BLOCK"`},
		[]string{`gpu_node_group.capacity_reservation: Capacity Block cr-0now (g5.xlarge in us-west-2a, 2 of 2 free) closes at`})
	check("block before its window", func(ng *NodeGroupSpec) { ng.CapacityType = CapacityBlock; odcr("cr-0later", FallbackNone)(ng) },
		[]string{`gpu_node_group.desired_size: Capacity Block cr-0later (g5.xlarge in us-west-2a, 4 of 4 free) opens at`}, nil)
	check("block before its window, scaled to 0", func(ng *NodeGroupSpec) {
		ng.CapacityType, ng.DesiredSize, ng.MinSize = CapacityBlock, 0, 0
		odcr("cr-0later", FallbackNone)(ng)
	}, nil, nil)
}

// TestNodeGroupOnReservation: a GPU node group on a reservation launches
// from a launch template that names it, in its zone only, takes its free
// instances, reads back its disk size and reservation from the template,
// and gives the instances back when deleted. A Capacity Block outside its
// window fails the node group with the reservation named.
func TestNodeGroupOnReservation(t *testing.T) {
	c, standIn := standInClients(t)
	reservationFixtures(standIn)
	ctx := context.Background()
	spec := testSpec("resv")
	spec.GPU.DesiredSize, spec.GPU.MinSize, spec.GPU.MaxSize = 2, 1, 2
	spec.GPU.Reservation = &CapacityReservationSpec{Tags: map[string]string{"pool": "llm"}, Fallback: FallbackNone}
	cl, err := c.CreateCluster(ctx, spec)
	if err != nil {
		t.Fatalf("creating: %v", err)
	}
	if cl.GPU.DiskSize != 200 || cl.GPU.Reservation == nil || cl.GPU.Reservation.ID != "cr-0open" || cl.GPU.Reservation.Fallback != FallbackNone {
		t.Fatalf("GPU node group read back as disk %d, reservation %+v", cl.GPU.DiskSize, cl.GPU.Reservation)
	}
	if cl.System.Reservation != nil || cl.System.DiskSize != 100 {
		t.Fatalf("system node group read back as %+v", cl.System)
	}
	zones := map[string]bool{}
	subnets, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: cl.GPU.Subnets})
	if err != nil {
		t.Fatal(err)
	}
	for _, sn := range subnets.Subnets {
		zones[aws.ToString(sn.AvailabilityZone)] = true
	}
	if len(zones) != 1 || !zones["us-west-2a"] {
		t.Fatalf("GPU node group in zones %v, want the reservation's us-west-2a only", zones)
	}
	if in, od := standIn.ReservationUse("resv", "gpu"); in != 2 || od != 0 || standIn.ReservationAvailable("cr-0open") != 0 {
		t.Fatalf("%d in the reservation, %d on-demand, %d left free; want 2, 0, 0", in, od, standIn.ReservationAvailable("cr-0open"))
	}
	// Read again, nothing is to be replaced.
	spec.GPU.Reservation = &CapacityReservationSpec{ID: "cr-0open", Fallback: FallbackNone}
	if cl.GPU.replacedBy(spec.GPU, nil) {
		t.Fatalf("the node group as read back (%+v) would be replaced by its own spec", cl.GPU.NodeGroupSpec)
	}

	late := spec.GPU
	late.Name, late.CapacityType, late.DesiredSize = "gpu-block", CapacityBlock, 1
	late.Reservation = &CapacityReservationSpec{ID: "cr-0later", Fallback: FallbackNone}
	if err := c.resolveReservation(ctx, &late); err != nil {
		t.Fatal(err)
	}
	err = c.ensureNodeGroup(ctx, spec, late, cl.Network.PrivateSubnetIDs[:1], cl.GPU.NodeRoleARN)
	if err == nil || !strings.Contains(err.Error(), "CREATE_FAILED") || !strings.Contains(err.Error(), "Capacity Block cr-0later (g5.xlarge in us-west-2a, 4 of 4 free), which is scheduled") {
		t.Fatalf("a node group on a Capacity Block before its window: %v", err)
	}
	if err := c.DeleteCluster(ctx, "resv"); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	if n := countOwned(t, c, "resv"); n != 0 {
		t.Fatalf("%d tagged parts left after delete", n)
	}
	if got := standIn.ReservationAvailable("cr-0open"); got != 2 {
		t.Fatalf("%d free in cr-0open after the delete, want its 2 back", got)
	}
}

// TestKarpenterReservationChecks: with Karpenter (or EKS Auto Mode) nothing
// is fixed in size, so a reservation smaller than max_size, or a block not
// yet open, is said in words (what the launcher launches beyond it) rather
// than refused; a reservation no longer active is still refused.
func TestKarpenterReservationChecks(t *testing.T) {
	hour := time.Hour
	ng := NodeGroupSpec{InstanceType: "g5.xlarge", MaxSize: 8}
	for name, tc := range map[string]struct {
		r        CapacityReservation
		fallback string
		want     []string // in the warnings, in order
		refused  string
		autoMode bool
	}{
		"room for all":         {r: CapacityReservation{ID: "cr-1", State: "active", Available: 8}},
		"too small, none":      {r: CapacityReservation{ID: "cr-1", State: "active", Available: 3}, fallback: FallbackNone, want: []string{"room for 3 instances", "first 3 nodes", "max_size 8", "stay Pending"}},
		"too small, on demand": {r: CapacityReservation{ID: "cr-1", State: "active", Available: 3, Targeted: true}, fallback: FallbackOnDemand, want: []string{"room for 3 instances", "On-Demand nodes, at On-Demand prices"}},
		"block not yet open": {r: CapacityReservation{ID: "cr-2", Block: true, State: "scheduled", Start: time.Now().Add(hour), End: time.Now().Add(3 * hour), Available: 8},
			fallback: FallbackNone, want: []string{"opens at", "stay Pending", "closes at", "EC2 terminates its instances"}},
		"expired": {r: CapacityReservation{ID: "cr-3", State: "expired", End: time.Now().Add(-hour)}, fallback: FallbackNone, refused: "is expired since"},
		"auto mode, too small": {r: CapacityReservation{ID: "cr-1", State: "active", Available: 3}, fallback: FallbackOnDemand, autoMode: true,
			want: []string{"EKS Auto Mode launches its first 3 nodes", "EKS Auto Mode launches On-Demand nodes"}},
	} {
		t.Run(name, func(t *testing.T) {
			var res PreflightResult
			nodePoolReservationChecks(nodePoolLauncher(PreflightInput{Karpenter: !tc.autoMode, AutoMode: tc.autoMode}), tc.r,
				&CapacityReservationSpec{ID: tc.r.ID, Fallback: tc.fallback}, ng, &res)
			var warnings []string
			for _, w := range res.Warnings {
				warnings = append(warnings, w.Message)
			}
			text := strings.Join(warnings, "\n")
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("warnings %q lack %q", text, w)
				}
			}
			if len(tc.want) == 0 && text != "" {
				t.Errorf("warnings %q, want none", text)
			}
			switch {
			case tc.refused == "" && len(res.Findings) > 0:
				t.Errorf("refused: %v", res.Findings)
			case tc.refused != "" && (len(res.Findings) != 1 || !strings.Contains(res.Findings[0].Message, tc.refused)):
				t.Errorf("findings %v, want one naming %q", res.Findings, tc.refused)
			}
		})
	}
}
