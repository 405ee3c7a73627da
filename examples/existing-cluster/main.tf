# A fleet and its router on a Kubernetes cluster made elsewhere, reached
# through a kubeconfig whose exec plugin mints short-lived tokens. The
# cluster needs GPU nodes tainted nvidia.com/gpu:NoSchedule and an existing
# ReadWriteMany claim holding the weights.
terraform {
  required_providers {
    llmd = { source = "llmd-dev/llmd" }
  }
}

variable "kubeconfig" {
  type    = string
  default = "~/.kube/config"
}

provider "llmd" {
  region = "us-west-2"
}

locals {
  kubernetes = {
    config_path   = pathexpand(var.kubeconfig)
    instance_type = "g5.xlarge"
  }
}

resource "llmd_model_fleet" "qwen" {
  kubernetes = local.kubernetes
  name       = "qwen"
  replicas   = 4
  storage    = { claim_name = "models" }
}

resource "llmd_prefix_router" "router" {
  kubernetes = local.kubernetes
  fleet      = llmd_model_fleet.qwen.router_target
  name       = "router"
  # Made elsewhere, the cluster has no llmd system node group: place the
  # routers off the GPU nodes yourself.
  scheduling = { node_selector = { "kubernetes.io/os" = "linux" } }
}

output "router_endpoint" {
  value = llmd_prefix_router.router.url
}

output "baseline_endpoint" {
  value = llmd_model_fleet.qwen.baseline_endpoint
}
