# The A/B of the seed benchmark, run inside the cluster by a Job from the
# router's image (Terraform 1.14+; on an older Terraform delete this file and
# use the endpoints above from a pod of your own):
#
#   terraform apply -invoke=action.llmd_ab_benchmark.seed
#
# Its progress streams while it runs (the seed's round robin took 840 s on
# 8 x g5.xlarge and the router 2.3x less: about 20 minutes in all), then
# the table: rr (round robin over the baseline Service's pods) against the
# router, with each side's prefix hit rate against the ceiling the engines'
# caches allow. Run it on a fleet serving nothing else.
action "llmd_ab_benchmark" "seed" {
  config {
    cluster  = llmd_inference_cluster.main.kubernetes
    baseline = llmd_model_fleet.qwen.baseline_endpoint
    router   = llmd_prefix_router.router.url
  }
}
