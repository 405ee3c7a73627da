package provider

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// gpuRoomError is the plan-time check that the cluster's GPU nodes can hold
// the fleet at its largest (replicas, or autoscaling.max_replicas): a
// managed node group runs its desired size (no node autoscaler), Karpenter
// at most max_size nodes (the NodePool's limit; the cluster exports that
// as gpu_node_desired_size), and a pod beyond what those nodes hold would stay Pending
// until the apply's timeout. It reads only the cluster's exported
// `kubernetes` facts and says nothing while they are unknown (a cluster
// created or resized in the same apply), where the fleet's placement is its
// own (scheduling.node_selector), or where the instance type has no
// built-in figures. Other workloads on the same nodes are not seen: the
// apply still names Pending pods and why.
func gpuRoomError(cluster *kubernetesModel, s fleetSettings) (path.Path, string) {
	if cluster == nil || (s.Scheduling != nil && s.Scheduling.NodeSelector != nil) {
		return path.Empty(), ""
	}
	size, instanceType := cluster.GPUNodeDesiredSize, cluster.GPUInstanceType
	if size.IsNull() || size.IsUnknown() || instanceType.IsNull() || instanceType.IsUnknown() {
		return path.Empty(), ""
	}
	in, err := workloads.LookupInstance(instanceType.ValueString())
	if err != nil || in.GPUs == 0 {
		return path.Empty(), ""
	}
	want, at, what := s.Replicas, path.Root("replicas"), "replicas"
	if s.Autoscaling != nil {
		want, at, what = s.Autoscaling.MaxReplicas, path.Root("autoscaling").AtName("max_replicas"), "autoscaling.max_replicas"
	}
	tp := max(s.VLLM.TensorParallelSize, 1)
	perNode, why := int64(in.GPUs)/tp, fmt.Sprintf("%d GPU(s), vllm.tensor_parallel_size %d", in.GPUs, tp)
	if perNode == 0 {
		return path.Root("vllm").AtName("tensor_parallel_size"), fmt.Sprintf("vllm.tensor_parallel_size = %d needs %d GPUs on one node, but the cluster's GPU nodes (%s) have %d: "+
			"lower it to %d or less, or choose a gpu_node_group.instance_type with more GPUs on llmd_inference_cluster.", tp, tp, instanceType.ValueString(), in.GPUs, in.GPUs)
	}
	if s.Scheduling != nil && s.Scheduling.OnePerNode != nil && *s.Scheduling.OnePerNode {
		perNode, why = 1, "scheduling.one_per_node"
	}
	// The instance's figures are what one fleet pod may request there (the
	// node's allocatable after its DaemonSets; the pod's default requests):
	// smaller requests fit more pods.
	asks := map[string]*string{}
	if r := s.Resources; r != nil {
		asks["cpu"], asks["memory"] = r.CPU, r.Memory
	}
	for _, r := range []struct{ name, offer string }{{"cpu", in.CPU}, {"memory", in.Memory}} {
		ask := r.offer
		if asks[r.name] != nil {
			ask = *asks[r.name]
		}
		offered, err1 := resource.ParseQuantity(r.offer)
		asked, err2 := resource.ParseQuantity(ask)
		if err1 != nil || err2 != nil || asked.MilliValue() <= 0 {
			continue
		}
		if fit := offered.MilliValue() / asked.MilliValue(); fit < perNode {
			perNode, why = fit, fmt.Sprintf("resources.%s %s of the %s one node offers", r.name, ask, r.offer)
		}
	}
	if perNode == 0 {
		return path.Root("resources"), fmt.Sprintf("one fleet pod does not fit on a GPU node of the cluster (%s): %s. Lower resources.cpu and resources.memory.",
			instanceType.ValueString(), why)
	}
	room := size.ValueInt64() * perNode
	if want <= room {
		return path.Empty(), ""
	}
	return at, fmt.Sprintf("%s = %d, but the cluster's GPU node group holds %d fleet pods: %d nodes (gpu_node_group.desired_size; with compute.mode = \"karpenter\", "+
		"max_size, the NodePool's limit) of %s, %d pod(s) each (%s). The other pods would stay Pending. Set gpu_node_group.desired_size and max_size to %d or more on "+
		"llmd_inference_cluster, or %s to %d or less.",
		what, want, room, size.ValueInt64(), instanceType.ValueString(), perNode, why, (want+perNode-1)/perNode, what, room)
}
