# Every cluster llmd_inference_cluster made in the provider's region.
# `terraform query -generate-config-out=clusters.tf` writes an import block
# and a resource block for each.
list "llmd_inference_cluster" "all" {
  provider = llmd
}

# Only the clusters whose name starts with "prod-".
list "llmd_inference_cluster" "prod" {
  provider = llmd
  config {
    name_prefix = "prod-"
  }
}
