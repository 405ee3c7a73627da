# Who the provider acts as; principal_arn is what the cluster grants Kubernetes admin to.
data "llmd_caller_identity" "me" {}

output "principal" {
  value = data.llmd_caller_identity.me.principal_arn
}
