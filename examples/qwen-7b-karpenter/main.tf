# The seed stack with a bill that follows the load: GPU nodes from Karpenter
# (compute.mode = "karpenter") instead of a fixed node group, and a fleet
# the router's work (tokens a second it places) scales between 2 and 8 vLLM
# replicas. Each replica gets a g5.xlarge when it is Pending; an empty node
# goes after 5 minutes.
terraform {
  required_providers {
    llmd = { source = "llmd-dev/llmd" }
  }
}

variable "region" {
  type    = string
  default = "us-west-2"
}

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
  name = "llmd-qwen-7b-karpenter"
  networking = {
    vpc_cidr           = "10.0.0.0/16"
    availability_zones = ["${var.region}a", "${var.region}b"]
  }
  compute = {
    mode              = "karpenter"
    consolidate_after = "5m"
  }
  # What Karpenter's GPU nodes are: at most max_size of them.
  gpu_node_group = {
    instance_type = "g5.xlarge"
    max_size      = 8
  }
  # Two system nodes: Karpenter's two controller replicas go on different nodes.
  system_node_group = {
    instance_type = "m6i.4xlarge"
    desired_size  = 2
    min_size      = 2
    max_size      = 2
  }
  model_storage = {}
}

resource "llmd_model_fleet" "qwen" {
  cluster = llmd_inference_cluster.main.kubernetes
  name    = "qwen"
  storage = llmd_inference_cluster.main.model_storage
  autoscaling = {
    min_replicas = 2
    max_replicas = 8
  }
  model = {
    served_name = "Qwen/Qwen2.5-7B-Instruct"
    path        = "Qwen2.5-7B-Instruct"
    source      = "hf://Qwen/Qwen2.5-7B-Instruct@${var.model_revision}"
  }
}

resource "llmd_prefix_router" "router" {
  cluster = llmd_inference_cluster.main.kubernetes
  fleet   = llmd_model_fleet.qwen.router_target
  name    = "router"
}

output "router_endpoint" {
  description = "The prefix-cache-aware router (in-cluster)."
  value       = llmd_prefix_router.router.url
}
