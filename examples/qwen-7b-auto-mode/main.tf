# The seed stack the way EKS Auto Mode teams build it: GPU nodes from Auto
# Mode (compute.mode = "auto_mode": EKS runs the node autoscaler, its AMI
# carries the NVIDIA driver and device plugin) and the weights streamed from
# S3 instead of FSx for Lustre. The router's work (tokens a second it places)
# scales the fleet between 2 and 8 vLLM replicas; each gets a g5.xlarge when it is Pending, and an
# empty node goes after 5 minutes.
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
  name = "llmd-qwen-7b-auto-mode"
  networking = {
    vpc_cidr           = "10.0.0.0/16"
    availability_zones = ["${var.region}a", "${var.region}b"]
  }
  compute = {
    mode              = "auto_mode"
    consolidate_after = "5m"
  }
  # What Auto Mode's GPU nodes are: at most max_size of them.
  gpu_node_group = {
    instance_type = "g5.xlarge"
    max_size      = 8
  }
  # The weights in a private S3 bucket (each fleet reads its own prefix
  # through Pod Identity and the VPC's S3 gateway endpoint); no file system.
  model_storage = { enabled = false }
  model_bucket  = {}
  addons = {
    fsx_csi_driver = { enabled = false }
  }
}

resource "llmd_model_fleet" "qwen" {
  cluster = llmd_inference_cluster.main.kubernetes
  name    = "qwen"
  storage = llmd_inference_cluster.main.model_bucket
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
