# An EKS cluster for LLM inference in its own VPC: eight g5.xlarge GPU nodes
# (one A10G each, tainted nvidia.com/gpu=true:NoSchedule, labelled
# nvidia.com/gpu.present=true) in the zone of an FSx for Lustre file system
# that imports the weights from S3, one system node, the EKS add-ons, and in
# the cluster the NVIDIA device plugin and kube-prometheus-stack with llmd's
# Grafana dashboards.

variable "admin_cidrs" {
  description = "CIDRs allowed to the public Kubernetes API endpoint: your office or VPN egress ranges."
  type        = list(string)
}

variable "grafana_admin_password" {
  description = "Grafana's admin password; never stored in state. Leave null to have one generated into a Secret."
  type        = string
  sensitive   = true
  ephemeral   = true
  default     = null
}

variable "ci_role_arn" {
  description = "IAM role your CI plans with; it gets read access to the cluster."
  type        = string
}

resource "llmd_inference_cluster" "main" {
  name               = "llmd-demo"
  kubernetes_version = "1.33"

  networking = {
    vpc_cidr           = "10.0.0.0/16"
    availability_zones = ["us-west-2a", "us-west-2b", "us-west-2c"]
  }

  endpoint_access = {
    public       = true
    private      = true
    public_cidrs = var.admin_cidrs
  }

  gpu_node_group = {
    instance_type = "g5.xlarge"
    desired_size  = 8
    min_size      = 8
    max_size      = 8
  }

  model_storage = {
    deployment_type      = "SCRATCH_2"
    storage_capacity_gib = 1200
    s3_import = {
      uri = "s3://my-models/Qwen2.5-7B-Instruct/"
    }
    # deletion_protection = true is the default: no plan may delete the weights.
  }

  addons = {
    # Unset versions take EKS's default for the Kubernetes version; pin one like this.
    coredns = { version = "v1.11.4-eksbuild.2" }
    # In the cluster: both on by default. A private VPC points them at mirrors.
    nvidia_device_plugin = { image = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0" }
    monitoring = {
      chart_repository = "https://prometheus-community.github.io/helm-charts"
      retention        = "15d"
    }
  }

  # Write-only: bump the version to write a new password.
  grafana_admin_password         = var.grafana_admin_password
  grafana_admin_password_version = "1"

  access_entries = {
    (var.ci_role_arn) = {
      policy_arn = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"
    }
  }

  tags = {
    env = "demo"
  }

  timeouts {
    create = "60m"
    delete = "45m"
  }
}

# Other llmd resources take the cluster's kubernetes object; they mint their
# own short-lived EKS tokens, so one apply creates the cluster and deploys to it.
output "kubernetes" {
  value = llmd_inference_cluster.main.kubernetes
}

# llmd_model_fleet takes this as storage.
output "model_storage" {
  value = llmd_inference_cluster.main.model_storage
}
