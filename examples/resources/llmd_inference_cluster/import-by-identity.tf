# Terraform 1.12+: import by identity; region defaults to the provider's.
import {
  to = llmd_inference_cluster.main
  identity = {
    name   = "llmd-demo"
    region = "us-west-2"
  }
}
