// The stand-in's EKS answers pointed at a local control plane, so a client
// built from DescribeCluster (endpoint, CA) reaches a real kube-apiserver.

package testenv

import "strings"

// clusterPointers says which local control plane answers for which EKS cluster.
type clusterPointers struct {
	byName map[string]*Cluster
	all    *Cluster
}

// PointClusterAt makes the stand-in's CreateCluster and DescribeCluster
// answers for the EKS cluster name carry c's endpoint and CA (set before or
// after the cluster is created; it outlives a re-creation under the same
// name). Tokens minted for it then reach c's EKS token webhook.
func (s *AWSStandIn) PointClusterAt(name string, c *Cluster) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kube.byName == nil {
		s.kube.byName = map[string]*Cluster{}
	}
	s.kube.byName[name] = c
}

// PointAllClustersAt does the same for every EKS cluster without a cluster of
// its own from PointClusterAt.
func (s *AWSStandIn) PointAllClustersAt(c *Cluster) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kube.all = c
}

// pointAt patches an EKS cluster description (key "cluster/NAME") with the
// endpoint and CA of its local control plane. The caller holds s.mu.
func (s *AWSStandIn) pointAt(key string, obj map[string]any) {
	name, ok := strings.CutPrefix(key, "cluster/")
	if !ok {
		return
	}
	c := s.kube.byName[name]
	if c == nil {
		c = s.kube.all
	}
	if c == nil {
		return
	}
	obj["endpoint"] = c.Host
	obj["certificateAuthority"] = map[string]any{"data": base64Std(c.CAData)}
}
