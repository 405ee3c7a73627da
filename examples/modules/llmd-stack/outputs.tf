output "router_url" {
  description = "B: the prefix-cache-aware router's OpenAI-compatible endpoint (in-cluster)."
  value       = llmd_prefix_router.this.url
}

output "baseline_url" {
  description = "A: the round-robin Service over the same vLLM pods (in-cluster), for the A/B comparison."
  value       = llmd_model_fleet.this.baseline_endpoint
}

output "cluster_name" {
  description = "Name of the EKS cluster."
  value       = llmd_inference_cluster.this.name
}

output "kubernetes" {
  description = "The cluster's connection (endpoint, CA, region, node placement): pass it as `cluster` to more fleets or routers, or to llmd_cluster_credentials."
  value       = llmd_inference_cluster.this.kubernetes
}

output "served_model_name" {
  description = "The model name clients ask for."
  value       = llmd_model_fleet.this.router_target.served_model
}
