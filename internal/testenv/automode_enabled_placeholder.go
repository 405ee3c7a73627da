// PLACEHOLDER, deleted at merge: the stand-in change that records
// CreateCluster's and UpdateClusterConfig's computeConfig brings the real
// AutoModeEnabled. Nothing but PlayAutoMode's test may use autoModeForTest.

package testenv

import "sync"

// autoModeForTest holds, by EKS cluster name, whether a test declared Auto
// Mode enabled (bool values).
var autoModeForTest sync.Map

// AutoModeEnabled reports whether the EKS cluster has Auto Mode's compute
// enabled.
func (s *AWSStandIn) AutoModeEnabled(cluster string) bool {
	// TODO(merge): replace with the stand-in's record of DescribeCluster's
	// computeConfig.enabled for cluster.
	on, _ := autoModeForTest.Load(cluster)
	return on == true
}
