# Gateway mode: the prefix-cache-aware router as the endpoint picker of a
# Gateway the platform team already runs (Envoy Gateway, kgateway, Istio,
# GKE, NGINX Gateway Fabric), through the Gateway API Inference Extension.
# One apply makes the cluster with the InferencePool CRD, the fleet, the
# router and the InferencePool over the fleet's pods; the team then points
# an HTTPRoute of its own Gateway at that pool (the route_manifest output).
# Clients reach the fleet through the gateway, which authenticates them.
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
    error_message = "model_revision must be a full 40-hex commit SHA."
  }
}

variable "gateway" {
  type        = object({ name = string, namespace = string })
  description = "The team's Gateway (gateway.networking.k8s.io) the HTTPRoute attaches to."
  default     = { name = "inference-gateway", namespace = "gateway" }
}

provider "llmd" {
  region = var.region
}

resource "llmd_inference_cluster" "main" {
  name = "llmd-gateway"
  networking = {
    vpc_cidr           = "10.0.0.0/16"
    availability_zones = ["${var.region}a", "${var.region}b"]
  }
  gpu_node_group = {
    instance_type = "g5.xlarge"
    desired_size  = 4
    min_size      = 4
    max_size      = 4
  }
  model_storage = {}
  addons = {
    # The InferencePool CRD of the Gateway API Inference Extension (pinned),
    # applied before the router that needs it.
    inference_extension = {}
  }
}

resource "llmd_model_fleet" "qwen" {
  cluster  = llmd_inference_cluster.main.kubernetes
  name     = "qwen"
  replicas = 4
  storage  = llmd_inference_cluster.main.model_storage
  model = {
    served_name = "Qwen/Qwen2.5-7B-Instruct"
    path        = "Qwen2.5-7B-Instruct"
    source      = "hf://Qwen/Qwen2.5-7B-Instruct@${var.model_revision}"
  }
}

resource "llmd_prefix_router" "picker" {
  cluster = llmd_inference_cluster.main.kubernetes
  fleet   = llmd_model_fleet.qwen.router_target
  name    = "qwen-pool"
  gateway = {
    # FailClose (GIE's default) fails requests while no router answers;
    # FailOpen lets the gateway pick a pod itself, without prefix affinity.
    failure_mode = "FailClose"
  }
}

# The HTTPRoute the team applies beside its Gateway (kubectl apply -f, or its
# own Kubernetes provider): every request on the route goes to the pool, and
# the gateway asks the router which pod serves it.
output "route_manifest" {
  value = yamlencode({
    apiVersion = "gateway.networking.k8s.io/v1"
    kind       = "HTTPRoute"
    metadata   = { name = "qwen", namespace = llmd_model_fleet.qwen.namespace }
    spec = {
      parentRefs = [{ name = var.gateway.name, namespace = var.gateway.namespace }]
      rules = [{
        matches     = [{ path = { type = "PathPrefix", value = "/" } }]
        backendRefs = [{ group = "inference.networking.k8s.io", kind = "InferencePool", name = llmd_prefix_router.picker.inference_pool }]
      }]
    }
  })
}
