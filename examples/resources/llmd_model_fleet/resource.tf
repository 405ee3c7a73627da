# Eight vLLM replicas of Qwen2.5-7B-Instruct, one per g5.xlarge GPU node, on
# the cluster's FSx for Lustre weights, with the round-robin baseline Service
# beside them. The cluster is created in the same apply: no provider-level
# Kubernetes settings.
resource "llmd_model_fleet" "qwen" {
  cluster = llmd_inference_cluster.main.kubernetes
  storage = llmd_inference_cluster.main.model_storage

  name      = "qwen"
  namespace = "llmd"
  replicas  = 8

  model = {
    served_name = "Qwen/Qwen2.5-7B-Instruct"
    path        = "Qwen2.5-7B-Instruct"
  }

  vllm = {
    block_size    = 64
    max_model_len = 8192
  }

  timeouts {
    create = "60m"
  }
}

output "baseline_endpoint" {
  value = llmd_model_fleet.qwen.baseline_endpoint
}
