# An EKS cluster for LLM inference in its own VPC: eight g5.xlarge GPU nodes
# (one A10G each, tainted nvidia.com/gpu=true:NoSchedule) and one system node.
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
    public_cidrs = ["203.0.113.0/24"]
  }

  gpu_node_group = {
    instance_type = "g5.xlarge"
    desired_size  = 8
    min_size      = 8
    max_size      = 8
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
