// Package kube is how the provider works on a Kubernetes cluster it may have
// created in the same apply: clients built inside CRUD from the cluster's
// endpoint and CA (EKS bearer tokens minted from the provider's own AWS
// configuration, re-minted before they expire, never stored), server-side
// apply of typed objects under the field manager "llmd", the inventory of
// what was applied (pruned on update, deleted in dependency order on
// destroy), drift read from the fields llmd manages, and rollout waits that
// fail fast with the reason. It holds no Terraform types.
package kube
