# The seed stack in one apply: an EKS cluster with 8 x g5.xlarge (one A10G
# each) and an m6i.4xlarge system node, 8 vLLM replicas of
# Qwen2.5-7B-Instruct on FSx for Lustre weights, 2 prefix-cache-aware
# routers, and the round-robin baseline Service for the A/B comparison.
terraform {
  required_providers {
    llmd = { source = "llmd-dev/llmd" }
  }
}

variable "region" {
  type    = string
  default = "us-west-2"
}

# The weights are staged once from the Hugging Face Hub onto the cluster's
# FSx for Lustre file system; pin the commit (the model page's "Files and
# versions" history) so every apply stages the same bytes.
variable "model_revision" {
  type        = string
  description = "Commit of Qwen/Qwen2.5-7B-Instruct on the Hugging Face Hub to stage (the full 40-hex SHA)."
  validation {
    condition     = can(regex("^[0-9a-f]{40}$", var.model_revision))
    error_message = "model_revision must be a full 40-hex commit SHA: a branch or tag moves, and a staged revision is never downloaded again."
  }
}

provider "llmd" {
  region = var.region
}

resource "llmd_inference_cluster" "main" {
  name = "llmd-qwen-7b"
  networking = {
    vpc_cidr           = "10.0.0.0/16"
    availability_zones = ["${var.region}a", "${var.region}b"]
  }
  gpu_node_group = {
    instance_type = "g5.xlarge"
    desired_size  = 8
    min_size      = 8
    max_size      = 8
  }
  system_node_group = {
    instance_type = "m6i.4xlarge"
  }
  # SCRATCH_2, 1200 GiB, in the GPU nodes' zone; deletion_protection stays on.
  model_storage = {}
}

resource "llmd_model_fleet" "qwen" {
  cluster  = llmd_inference_cluster.main.kubernetes
  name     = "qwen"
  replicas = 8
  storage  = llmd_inference_cluster.main.model_storage
  model = {
    served_name = "Qwen/Qwen2.5-7B-Instruct"
    path        = "Qwen2.5-7B-Instruct"
    source      = "hf://Qwen/Qwen2.5-7B-Instruct@${var.model_revision}"
  }
}

resource "llmd_prefix_router" "router" {
  cluster  = llmd_inference_cluster.main.kubernetes
  fleet    = llmd_model_fleet.qwen.router_target
  name     = "router"
  replicas = 2
}

output "router_endpoint" {
  description = "B: the prefix-cache-aware router (in-cluster)."
  value       = llmd_prefix_router.router.url
}

output "baseline_endpoint" {
  description = "A: the round-robin Service over the same pods (in-cluster)."
  value       = llmd_model_fleet.qwen.baseline_endpoint
}
