// Package workloads builds the typed Kubernetes objects the provider applies:
// the vLLM fleet (namespace, the FSx volume and claim, the decode Deployment,
// the round-robin baseline Service, a PodDisruptionBudget, a PodMonitor) from
// a spec free of Terraform types. Every vLLM flag and label the router must
// agree with is set here once and reported back in the fleet's RouterTarget.
package workloads
