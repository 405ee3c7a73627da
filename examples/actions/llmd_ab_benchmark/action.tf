# The A/B benchmark inside the cluster, the seed workload by default:
# `terraform apply -invoke=action.llmd_ab_benchmark.seed` streams the run's
# progress, then prints the table (rr against the router) and the hit-rate
# ceiling the engines' caches allow.
action "llmd_ab_benchmark" "seed" {
  config {
    cluster  = llmd_inference_cluster.main.kubernetes
    baseline = llmd_model_fleet.qwen.baseline_endpoint
    router   = llmd_prefix_router.router.url
  }
}

# A shorter run of the same shape, e.g. after each change of the router's scoring.
action "llmd_ab_benchmark" "quick" {
  config {
    cluster         = llmd_inference_cluster.main.kubernetes
    baseline        = llmd_model_fleet.qwen.baseline_endpoint
    router          = llmd_prefix_router.router.url
    num_prompts     = 900
    max_concurrency = 128
    timeout         = "20m"
  }
}

resource "terraform_data" "scoring" {
  input = llmd_prefix_router.router.config_hash
  lifecycle {
    action_trigger {
      events  = [after_update]
      actions = [action.llmd_ab_benchmark.quick]
    }
  }
}
