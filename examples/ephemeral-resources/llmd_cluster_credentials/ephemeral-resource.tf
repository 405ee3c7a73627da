# Credentials for the kubernetes and helm providers on a cluster this
# provider made, never stored in plan or state (Terraform 1.10+).
ephemeral "llmd_cluster_credentials" "main" {
  cluster_name = llmd_inference_cluster.main.name
}

# exec: the provider's binary mints a new token whenever the one held is ten
# minutes old, so an apply that outlasts EKS's fifteen-minute token
# (a long Helm release, a slow rollout) never meets Unauthorized.
provider "kubernetes" {
  host                   = ephemeral.llmd_cluster_credentials.main.host
  cluster_ca_certificate = ephemeral.llmd_cluster_credentials.main.cluster_ca_certificate
  exec {
    api_version = ephemeral.llmd_cluster_credentials.main.exec.api_version
    command     = ephemeral.llmd_cluster_credentials.main.exec.command
    args        = ephemeral.llmd_cluster_credentials.main.exec.args
    env         = ephemeral.llmd_cluster_credentials.main.exec.env
  }
}

provider "helm" {
  kubernetes = {
    host                   = ephemeral.llmd_cluster_credentials.main.host
    cluster_ca_certificate = ephemeral.llmd_cluster_credentials.main.cluster_ca_certificate
    exec = {
      api_version = ephemeral.llmd_cluster_credentials.main.exec.api_version
      command     = ephemeral.llmd_cluster_credentials.main.exec.command
      args        = ephemeral.llmd_cluster_credentials.main.exec.args
      env         = ephemeral.llmd_cluster_credentials.main.exec.env
    }
  }
}
