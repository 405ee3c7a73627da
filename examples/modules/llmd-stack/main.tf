# The whole stack in one apply: an EKS cluster with GPU and system node
# groups and the weights on FSx for Lustre, a vLLM fleet with its
# round-robin baseline Service, and the prefix-cache router in front of it.
# The root module configures the llmd provider and passes it down.

resource "llmd_inference_cluster" "this" {
  name = var.name
  tags = var.tags
  networking = {
    vpc_cidr           = var.vpc_cidr
    availability_zones = var.availability_zones
  }
  gpu_node_group = {
    instance_type = var.gpu_instance_type
    desired_size  = var.gpu_nodes
    min_size      = var.gpu_nodes
    max_size      = var.gpu_nodes
  }
  system_node_group = {
    instance_type = var.system_instance_type
  }
  model_storage = {
    deletion_protection = var.storage_deletion_protection
  }
}

resource "llmd_model_fleet" "this" {
  cluster   = llmd_inference_cluster.this.kubernetes
  storage   = llmd_inference_cluster.this.model_storage
  name      = "fleet"
  namespace = var.namespace
  replicas  = var.gpu_nodes
  model     = var.model
  hf_token  = var.hf_token
}

resource "llmd_prefix_router" "this" {
  cluster   = llmd_inference_cluster.this.kubernetes
  fleet     = llmd_model_fleet.this.router_target
  name      = "router"
  namespace = var.namespace
  replicas  = var.router_replicas
}
