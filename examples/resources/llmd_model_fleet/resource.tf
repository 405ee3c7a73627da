# Eight vLLM pods of Qwen2.5-7B-Instruct, one per g5.xlarge, on weights
# already on an FSx for Lustre file system, with KV-cache events on.
resource "llmd_model_fleet" "qwen" {
  cluster  = llmd_inference_cluster.main.kubernetes
  name     = "qwen"
  replicas = 8

  storage = {
    file_system_id = "fs-0123456789abcdef0"
    dns_name       = "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com"
    mount_name     = "abcdefgh"
  }

  vllm = { block_size = 64 }
}
