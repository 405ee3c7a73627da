# The fleets in cluster "prod-inference", with their settings read as an
# import reads them (include_resource).
list "llmd_model_fleet" "prod" {
  provider         = llmd
  include_resource = true
  config {
    cluster_name = "prod-inference"
  }
}
