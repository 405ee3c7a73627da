# The routers in namespace "llmd" of cluster "prod-inference".
list "llmd_prefix_router" "prod" {
  provider = llmd
  config {
    cluster_name = "prod-inference"
    namespace    = "llmd"
  }
}
