variable "name" {
  type        = string
  description = "Name of the EKS cluster and prefix of what the stack makes in AWS."
  validation {
    # EKS allows 100 characters; node group, role and file system names add
    # suffixes of up to 30.
    condition     = can(regex("^[a-z][a-z0-9-]{0,37}[a-z0-9]$", var.name))
    error_message = "name must be 2-39 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen, e.g. \"prod-inference\"."
  }
}

variable "availability_zones" {
  type        = list(string)
  description = "Two or more zones of the provider's region for the new VPC; null lets the provider pick zones that offer the GPU instance type."
  default     = null
  validation {
    condition     = var.availability_zones == null || length(coalesce(var.availability_zones, [])) >= 2
    error_message = "availability_zones needs at least two zones (EKS requires subnets in two), or null to let the provider choose."
  }
}

variable "vpc_cidr" {
  type        = string
  description = "CIDR block of the new VPC."
  default     = "10.0.0.0/16"
  validation {
    condition     = can(cidrhost(var.vpc_cidr, 0))
    error_message = "vpc_cidr must be an IPv4 CIDR block, e.g. \"10.0.0.0/16\"."
  }
}

variable "gpu_instance_type" {
  type        = string
  description = "GPU instance type of the fleet's nodes; one vLLM pod per node."
  default     = "g5.xlarge"
}

variable "gpu_nodes" {
  type        = number
  description = "GPU nodes, and so vLLM pods (the seed benchmark's 8 by default)."
  default     = 8
  validation {
    condition     = var.gpu_nodes >= 1 && var.gpu_nodes <= 100 && floor(var.gpu_nodes) == var.gpu_nodes
    error_message = "gpu_nodes must be a whole number from 1 to 100."
  }
}

variable "system_instance_type" {
  type        = string
  description = "Instance type of the system node group (routers, monitoring, weight staging)."
  default     = "m6i.4xlarge"
}

variable "model" {
  type = object({
    served_name = string
    path        = string
    source      = string
  })
  description = "The model: the name clients ask for, its directory on the cluster's FSx file system, and where to stage it from (hf://Org/Model@<40-hex commit>)."
  default = {
    served_name = "Qwen/Qwen2.5-7B-Instruct"
    path        = "Qwen2.5-7B-Instruct"
    source      = null
  }
  validation {
    condition     = var.model.source == null || can(regex("^hf://[^/@]+/[^/@]+@[0-9a-f]{40}$", coalesce(var.model.source, "")))
    error_message = "model.source must be hf://Org/Model@<commit>, the full 40-hex commit (a branch moves, and a staged revision is never downloaded again), or null for weights already on the file system."
  }
}

variable "hf_token" {
  type        = string
  description = "Hugging Face token for gated models: write-only, never in state (needs Terraform 1.11 or OpenTofu 1.11)."
  default     = null
  sensitive   = true
}

variable "router_replicas" {
  type        = number
  description = "Router replicas; two (the default) share their decisions and survive a node's loss."
  default     = 2
  validation {
    condition     = var.router_replicas >= 1 && floor(var.router_replicas) == var.router_replicas
    error_message = "router_replicas must be a whole number of at least 1."
  }
}

variable "namespace" {
  type        = string
  description = "Namespace of the fleet and the router."
  default     = "llmd"
}

variable "storage_deletion_protection" {
  type        = bool
  description = "Refuse any plan that would delete the FSx file system holding the weights; set false only to tear the stack down."
  default     = true
}

variable "tags" {
  type        = map(string)
  description = "Tags for every AWS object the stack makes, beneath the provider's default_tags."
  default     = {}
}
