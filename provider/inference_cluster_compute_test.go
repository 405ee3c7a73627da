package provider

import (
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

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

// TestPlanComputeStatus: compute.status stays what the last apply recorded
// while Karpenter's settings and the node groups stay, is known after apply
// where the apply acts on Karpenter, and is null with node groups.
func TestPlanComputeStatus(t *testing.T) {
	with := func(mode, version, status string) types.Object {
		v := computeDefault.Attributes()
		v["mode"], v["karpenter_version"] = types.StringValue(mode), types.StringValue(version)
		v["status"] = types.StringNull()
		if status != "" {
			v["status"] = types.StringValue(status)
		}
		return types.ObjectValueMust(computeTypes, v)
	}
	applied := with(computeKarpenter, "1.14.0", nodePoolApplied)
	for name, tc := range map[string]struct {
		plan, prior types.Object
		gpuChanged  bool
		want        attr.Value
	}{
		"unchanged":            {with(computeKarpenter, "1.14.0", ""), applied, false, types.StringValue(nodePoolApplied)},
		"new version":          {with(computeKarpenter, "1.15.0", ""), applied, false, types.StringUnknown()},
		"GPU nodes changed":    {with(computeKarpenter, "1.14.0", ""), applied, true, types.StringUnknown()},
		"drifted":              {with(computeKarpenter, "1.14.0", ""), with(computeKarpenter, "1.14.0", "drift: NodePool llmd-gpu missing"), false, types.StringUnknown()},
		"to karpenter":         {with(computeKarpenter, "1.14.0", ""), with(computeNodeGroup, "1.14.0", ""), false, types.StringUnknown()},
		"node groups":          {with(computeNodeGroup, "1.14.0", ""), applied, false, types.StringNull()},
		"auto mode unchanged":  {with(computeAutoMode, "1.14.0", ""), with(computeAutoMode, "1.14.0", nodePoolApplied), false, types.StringValue(nodePoolApplied)},
		"to auto mode":         {with(computeAutoMode, "1.14.0", ""), applied, false, types.StringUnknown()},
		"state before compute": {with(computeKarpenter, "1.14.0", ""), types.ObjectNull(computeTypes), false, types.StringUnknown()},
	} {
		if got := planCompute(tc.plan, tc.prior, tc.gpuChanged).Attributes()["status"]; !got.Equal(tc.want) {
			t.Errorf("%s: status %v, want %v", name, got, tc.want)
		}
	}
}

// TestModeChangeSaysEachStep: a plan between the NodePool modes warns,
// leaving mode first, what the apply does, and plans the GPU nodes of a
// NodePool (the control plane's version, no release version).
func TestModeChangeSaysEachStep(t *testing.T) {
	gpu := nodeGroupObject(&awsinfra.NodeGroup{NodeGroupSpec: awsinfra.NodeGroupSpec{Name: "gpu", InstanceType: "g5.xlarge", MaxSize: 8, DiskSize: 200}},
		types.ObjectNull(nodeGroupTypes), false)
	for _, tc := range []struct{ from, to, want string }{
		{computeKarpenter, computeAutoMode, "Karpenter replaced by EKS Auto Mode: The apply first deletes Karpenter's NodePool"},
		{computeAutoMode, computeKarpenter, "EKS Auto Mode replaced by Karpenter: The apply first deletes the Auto Mode NodePool and NodeClass"},
		{computeNodeGroup, computeAutoMode, "The GPU node group replaced by EKS Auto Mode: The apply deletes the GPU managed node group"},
	} {
		prior := inferenceClusterModel{Compute: withComputeMode(computeDefault, tc.from)}
		plan := inferenceClusterModel{Compute: withComputeMode(computeDefault, tc.to)}
		var diags diag.Diagnostics
		got := planNodePoolGPU(gpu, types.StringValue("1.34"), prior, plan, true, &diags)
		if len(diags) != 1 || !strings.HasPrefix(diags[0].Summary()+": "+diags[0].Detail(), tc.want) ||
			strings.Contains(diags[0].Detail(), "turns off what "+computeModeNames[tc.from]) != (tc.from != computeNodeGroup) {
			t.Errorf("%s -> %s: %v, want one warning starting %q", tc.from, tc.to, diags, tc.want)
		}
		if v := got.Attributes()["version"]; !v.Equal(types.StringValue("1.34")) {
			t.Errorf("%s -> %s: planned version %v, want the control plane's", tc.from, tc.to, v)
		}
	}
}
