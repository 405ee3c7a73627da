# Terraform 1.12+: import by identity; cluster_region defaults to the provider's.
import {
  to = llmd_model_fleet.qwen
  identity = {
    cluster_name = "llmd-demo"
    namespace    = "llmd"
    name         = "qwen"
  }
}
