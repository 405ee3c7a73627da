package testenv

import (
	"testing"

	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SystemNodeLabel is the label llmd_inference_cluster's system node group
// carries; the router runs there by default.
const SystemNodeLabel = "llmd.dev/pool"

// AddSystemNodes creates count fake nodes shaped like the system node group
// (m6i.4xlarge, no GPU, no taint, labelled llmd.dev/pool=system), named
// prefix-0, prefix-1, ..., one per zone in turn, and waits until they are
// Ready. They are deleted when the test ends.
func (c *Cluster) AddSystemNodes(t testing.TB, prefix string, count int) []string {
	t.Helper()
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	var nodes []*corev1.Node
	for i := range count {
		name := fmt.Sprintf("%s-%d", prefix, i)
		nodes = append(nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: map[string]string{
					"kubernetes.io/hostname":           name,
					"node.kubernetes.io/instance-type": "m6i.4xlarge",
					"eks.amazonaws.com/nodegroup":      prefix,
					"topology.kubernetes.io/zone":      []string{Region + "a", Region + "b"}[i%2],
					SystemNodeLabel:                    "system",
					"type":                             "kwok",
				},
			},
			Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
		})
	}
	return c.addNodes(t, nodes)
}
