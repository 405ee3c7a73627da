package provider

import (
	"slices"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
)

// TestKarpenterCapacityFromTheNodeGroup: gpu_node_group's capacity settings
// as Karpenter's capacity types, a reservation always first.
func TestKarpenterCapacityFromTheNodeGroup(t *testing.T) {
	for name, tc := range map[string]struct {
		ng   awsinfra.NodeGroupSpec
		want []string
	}{
		"on demand":                  {awsinfra.NodeGroupSpec{CapacityType: "ON_DEMAND"}, []string{"on-demand"}},
		"spot":                       {awsinfra.NodeGroupSpec{CapacityType: "SPOT"}, []string{"spot"}},
		"capacity block":             {awsinfra.NodeGroupSpec{CapacityType: "CAPACITY_BLOCK", Reservation: &awsinfra.CapacityReservationSpec{ID: "cr-1", Fallback: "none"}}, []string{"reserved"}},
		"reservation only":           {awsinfra.NodeGroupSpec{CapacityType: "ON_DEMAND", Reservation: &awsinfra.CapacityReservationSpec{ID: "cr-1", Fallback: "none"}}, []string{"reserved"}},
		"reservation then on demand": {awsinfra.NodeGroupSpec{CapacityType: "ON_DEMAND", Reservation: &awsinfra.CapacityReservationSpec{ID: "cr-1", Fallback: "on_demand"}}, []string{"reserved", "on-demand"}},
	} {
		if got := karpenterCapacityTypes(tc.ng); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
	for ami, want := range map[string]string{"AL2023_x86_64_NVIDIA": "al2023", "BOTTLEROCKET_x86_64_NVIDIA": "bottlerocket", "AL2_x86_64_GPU": "", "BOTTLEROCKET_x86_64": "bottlerocket", "WINDOWS_CORE_2022_x86_64": ""} {
		if got := karpenterAMIFamily(ami); got != want {
			t.Errorf("AMI family of %s: %q, want %q", ami, got, want)
		}
	}
}
