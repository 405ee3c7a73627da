package provider

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// systemCluster is a cluster object whose system node group carries its own
// label and taint and has the given desired size.
func systemCluster(size int64) connection {
	return connection{cluster: &kubernetesModel{
		SystemNodeLabels:      types.MapValueMust(types.StringType, map[string]attr.Value{"example.com/role": types.StringValue("router")}),
		SystemNodeTaints:      types.ListValueMust(types.StringType, []attr.Value{types.StringValue("dedicated=router:NoSchedule")}),
		SystemNodeDesiredSize: types.Int64Value(size),
	}}
}

var routerTaint = corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "router", Effect: corev1.TaintEffectNoSchedule}

// TestRouterPlacedFromCluster: the router and the staging Job go where the
// cluster's kubernetes object says its system nodes are (their labels, their
// taints tolerated), not to a fixed label; scheduling replaces either half.
func TestRouterPlacedFromCluster(t *testing.T) {
	ctx := context.Background()
	s := testRouterSettings()
	r, err := s.router(ctx, systemCluster(2))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.NodeSelector, map[string]string{"example.com/role": "router"}) || !reflect.DeepEqual(r.Tolerations, []corev1.Toleration{routerTaint}) {
		t.Errorf("router placed on %v tolerating %v, want the system nodes' label and taint", r.NodeSelector, r.Tolerations)
	}
	s.Scheduling = &struct {
		NodeSelector map[string]string `json:"node_selector,omitempty"`
		Tolerations  []string          `json:"tolerations,omitempty"`
	}{Tolerations: []string{"edge:NoExecute"}}
	if r, err = s.router(ctx, systemCluster(2)); err != nil {
		t.Fatal(err)
	}
	if r.NodeSelector["example.com/role"] != "router" || len(r.Tolerations) != 1 || r.Tolerations[0].Key != "edge" {
		t.Errorf("scheduling.tolerations alone gives %v tolerating %v, want the system label and only the configured toleration", r.NodeSelector, r.Tolerations)
	}

	var fs fleetSettings
	fs.Name, fs.Namespace, fs.Replicas, fs.Model.ServedName, fs.Model.Path = "qwen", "llmd", 1, "qwen", "Qwen2.5-7B-Instruct"
	fs.Model.Source = ptr.To("hf://Qwen/Qwen2.5-7B-Instruct@" + strings.Repeat("a", 40))
	fs.Storage.ClaimName, fs.VLLM.Image, fs.VLLM.BlockSize, fs.VLLM.TensorParallelSize = "weights", "vllm/vllm-openai:v0.30.0", 64, 1
	fs.VLLM.MaxModelLen, fs.VLLM.MaxNumSeqs = 4096, 64
	fs.KVEvents.Port, fs.KVEvents.ReplayPort, fs.KVEvents.Topic = 5557, 5558, "kv@{ip}:{port}@{model}"
	fs.Rollout.MaxUnavailable, fs.Rollout.StartupTimeout, fs.Rollout.DrainTimeout = 1, "30m", "60s"
	fs.Baseline.Type, fs.Baseline.Port = "ClusterIP", 8000
	f, err := fs.fleet(ctx, systemCluster(2))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Staging.NodeSelector, map[string]string{"example.com/role": "router"}) || !reflect.DeepEqual(f.Staging.Tolerations, []corev1.Toleration{routerTaint}) {
		t.Errorf("staging Job placed on %v tolerating %v, want the system nodes' label and taint", f.Staging.NodeSelector, f.Staging.Tolerations)
	}
}

// TestSharedNodeWarning: more than one router replica on a one-node system
// group is a warning on replicas; two nodes, one replica, a node selector of
// one's own or a cluster made elsewhere are not.
func TestSharedNodeWarning(t *testing.T) {
	s := testRouterSettings()
	if p, msg := sharedNodeWarning(systemCluster(1), s); !strings.Contains(msg, "desired_size = 1") || p.String() != "replicas" {
		t.Errorf("2 replicas on a one-node system group: %s %q, want a warning on replicas", p, msg)
	}
	one := s
	one.Replicas = 1
	own := s
	own.Scheduling = &struct {
		NodeSelector map[string]string `json:"node_selector,omitempty"`
		Tolerations  []string          `json:"tolerations,omitempty"`
	}{NodeSelector: map[string]string{"pool": "edge"}}
	for name, tc := range map[string]struct {
		conn connection
		s    routerSettings
	}{"two nodes": {systemCluster(2), s}, "one replica": {systemCluster(1), one}, "own selector": {systemCluster(1), own},
		"made elsewhere": {connection{direct: &directModel{}}, s}, "size unknown": {connection{cluster: &kubernetesModel{}}, s}} {
		if _, msg := sharedNodeWarning(tc.conn, tc.s); msg != "" {
			t.Errorf("%s: warns %q", name, msg)
		}
	}
}
