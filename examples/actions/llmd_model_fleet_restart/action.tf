# Restart the fleet's vLLM pods one at a time, waiting until each new pod is
# Ready: `terraform apply -invoke=action.llmd_model_fleet_restart.qwen`.
action "llmd_model_fleet_restart" "qwen" {
  config {
    cluster   = llmd_inference_cluster.main.kubernetes
    namespace = llmd_model_fleet.qwen.namespace
    name      = llmd_model_fleet.qwen.name
    timeout   = "45m"
  }
}

# Or restart them whenever the served LoRA adapters' version changes.
resource "terraform_data" "adapters" {
  input = var.adapters_version
  lifecycle {
    action_trigger {
      events  = [after_update]
      actions = [action.llmd_model_fleet_restart.qwen]
    }
  }
}
