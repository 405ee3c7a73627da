# The prefix-cache-aware router in front of a fleet: two replicas on the
# system node group, each following the fleet's pods and KV-cache events.
resource "llmd_prefix_router" "main" {
  cluster = llmd_inference_cluster.main.kubernetes
  fleet   = llmd_model_fleet.qwen.router_target
  name    = "router"

  scoring = { preset = "cost-aware" } # the default; "llmd" is llm-d's prefix 3, kv-usage 2, queue 2

  limits = {
    max_in_flight_per_pod = 64
    queue_timeout         = "30s"
  }

  service = {
    type                        = "LoadBalancer"
    internal                    = true
    load_balancer_source_ranges = ["10.0.0.0/8"]
  }
}

output "router_url" {
  value = llmd_prefix_router.main.url
}
