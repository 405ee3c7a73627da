// Package workloads builds the typed Kubernetes objects the provider applies:
// the vLLM fleet (namespace, the FSx volume and claim, the decode Deployment,
// the round-robin baseline Service, a PodDisruptionBudget, a PodMonitor) from
// a spec free of Terraform types, and the llmd-router deployment in front of
// it (ServiceAccount, a Role to watch the fleet's pods, the config file
// rendered with router/config's own types, Deployment, Service, PDB,
// ServiceMonitor). Every vLLM flag and label the router must
// agree with is set here once and reported back in the fleet's RouterTarget.
package workloads
