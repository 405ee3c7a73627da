package provider

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestGPURoomError(t *testing.T) {
	cluster := func(instanceType string, size types.Int64) *kubernetesModel {
		return &kubernetesModel{GPUInstanceType: types.StringValue(instanceType), GPUNodeDesiredSize: size}
	}
	g5x8 := cluster("g5.xlarge", types.Int64Value(8))
	g5x12 := cluster("g5.12xlarge", types.Int64Value(2))
	for name, tc := range map[string]struct {
		cluster  *kubernetesModel
		settings string // the fleet's settings as the Deployment's annotation holds them
		at       string
		want     []string
	}{
		"fits":          {g5x8, `{"replicas": 8}`, "", nil},
		"one too many":  {g5x8, `{"replicas": 9}`, "replicas", []string{"holds 8 fleet pods", "to 9 or more", "replicas to 8 or less"}},
		"size unknown":  {cluster("g5.xlarge", types.Int64Unknown()), `{"replicas": 99}`, "", nil},
		"older cluster": {cluster("g5.xlarge", types.Int64Null()), `{"replicas": 99}`, "", nil},
		"no cluster":    {nil, `{"replicas": 99}`, "", nil},
		"unknown type":  {cluster("x9.huge", types.Int64Value(1)), `{"replicas": 99}`, "", nil},
		"own nodes":     {g5x8, `{"replicas": 99, "scheduling": {"node_selector": {"pool": "mine"}}}`, "", nil},
		"autoscaling maximum": {cluster("g5.xlarge", types.Int64Value(2)), `{"replicas": 2, "autoscaling": {"min_replicas": 2, "max_replicas": 8}}`,
			"autoscaling.max_replicas", []string{"autoscaling.max_replicas = 8", "holds 2 fleet pods"}},
		"four GPUs, default requests": {g5x12, `{"replicas": 3}`, "replicas",
			[]string{"holds 2 fleet pods", "1 pod(s) each (resources.cpu 46 of the 46 one node offers)"}},
		"four GPUs, small requests": {g5x12, `{"replicas": 8, "resources": {"cpu": "10", "memory": "40Gi"}}`, "", nil},
		"four GPUs, tensor parallel 2": {g5x12, `{"replicas": 5, "vllm": {"tensor_parallel_size": 2}, "resources": {"cpu": "10", "memory": "40Gi"}}`,
			"replicas", []string{"holds 4 fleet pods", "2 pod(s) each (4 GPU(s), vllm.tensor_parallel_size 2)", "to 3 or more"}},
		"one per node": {g5x12, `{"replicas": 3, "resources": {"cpu": "1", "memory": "1Gi"}, "scheduling": {"one_per_node": true}}`,
			"replicas", []string{"1 pod(s) each (scheduling.one_per_node)"}},
		"tensor parallel beyond the node": {g5x8, `{"replicas": 8, "vllm": {"tensor_parallel_size": 2}}`,
			"vllm.tensor_parallel_size", []string{"needs 2 GPUs on one node", "have 1"}},
		"requests beyond the node": {g5x8, `{"replicas": 8, "resources": {"memory": "64Gi"}}`,
			"resources", []string{"does not fit", "resources.memory 64Gi of the 12Gi"}},
	} {
		t.Run(name, func(t *testing.T) {
			var s fleetSettings
			s.VLLM.TensorParallelSize = 1
			if err := json.Unmarshal([]byte(tc.settings), &s); err != nil {
				t.Fatal(err)
			}
			at, msg := gpuRoomError(tc.cluster, s)
			if tc.at == "" {
				if msg != "" {
					t.Fatalf("error %q at %s, want none", msg, at)
				}
				return
			}
			if at.String() != tc.at {
				t.Errorf("error at %s, want %s", at, tc.at)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
}
