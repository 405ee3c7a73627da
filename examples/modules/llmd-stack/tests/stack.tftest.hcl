# The module's own tests, with the llmd provider mocked: no AWS, no cluster.
# Computed values the tests read are set in the mock's defaults so they are
# well formed (a mocked string is otherwise random).
mock_provider "llmd" {
  mock_resource "llmd_prefix_router" {
    defaults = {
      url = "http://router.llmd.svc.cluster.local:8000"
    }
  }
  mock_resource "llmd_model_fleet" {
    defaults = {
      baseline_endpoint = "http://fleet-baseline.llmd.svc.cluster.local:8000"
      router_target = {
        namespace             = "llmd"
        selector              = "llmd.dev/fleet=fleet"
        http_port             = 8000
        kv_events_port        = 5557
        replay_port           = 5558
        topic                 = "kv"
        block_size            = 64
        served_model          = "Qwen/Qwen2.5-7B-Instruct"
        claim_name            = "llmd-weights"
        model_path            = "Qwen2.5-7B-Instruct"
        tokenizer_path        = "/models/Qwen2.5-7B-Instruct/tokenizer.json"
        tokenizer_config_path = "/models/Qwen2.5-7B-Instruct/tokenizer_config.json"
        max_num_seqs          = 256
        deployment            = "fleet"
        autoscaled            = false
        scale_to_zero_after   = null
        s3_region             = null
        s3_reader_role        = null
        scheduling_policy     = "priority"
      }
    }
  }
}

variables {
  name = "prod-inference"
}

run "defaults_are_the_seed_stack" {
  command = plan

  assert {
    condition     = llmd_inference_cluster.this.gpu_node_group.desired_size == 8 && llmd_inference_cluster.this.gpu_node_group.instance_type == "g5.xlarge"
    error_message = "the default GPU node group is 8 x g5.xlarge"
  }
  assert {
    condition     = llmd_model_fleet.this.replicas == 8
    error_message = "one vLLM pod per GPU node"
  }
  assert {
    condition     = llmd_prefix_router.this.replicas == 2
    error_message = "two routers by default"
  }
  assert {
    condition     = llmd_inference_cluster.this.model_storage.deletion_protection == true
    error_message = "the weights' file system is protected by default"
  }
}

run "sizes_follow_the_variables" {
  command = plan

  variables {
    gpu_nodes         = 3
    gpu_instance_type = "g6e.xlarge"
    router_replicas   = 1
    namespace         = "serving"
  }

  assert {
    condition     = llmd_inference_cluster.this.gpu_node_group.min_size == 3 && llmd_inference_cluster.this.gpu_node_group.max_size == 3
    error_message = "the GPU node group is fixed at gpu_nodes"
  }
  assert {
    condition     = llmd_model_fleet.this.replicas == 3 && llmd_model_fleet.this.namespace == "serving"
    error_message = "the fleet follows gpu_nodes and namespace"
  }
  assert {
    condition     = llmd_prefix_router.this.replicas == 1 && llmd_prefix_router.this.namespace == "serving"
    error_message = "the router follows router_replicas and namespace"
  }
}

run "outputs_are_wired" {
  command = apply

  assert {
    condition     = output.router_url == "http://router.llmd.svc.cluster.local:8000"
    error_message = "router_url is the router's url"
  }
  assert {
    condition     = output.baseline_url == "http://fleet-baseline.llmd.svc.cluster.local:8000"
    error_message = "baseline_url is the fleet's baseline endpoint"
  }
  assert {
    condition     = output.served_model_name == "Qwen/Qwen2.5-7B-Instruct"
    error_message = "served_model_name comes from the fleet's router_target"
  }
  assert {
    condition     = output.cluster_name == "prod-inference"
    error_message = "cluster_name is the cluster's name"
  }
  assert {
    condition     = llmd_prefix_router.this.fleet.served_model == llmd_model_fleet.this.router_target.served_model
    error_message = "the router takes the fleet's router_target as is"
  }
}

run "rejects_an_unpinned_model" {
  command = plan

  variables {
    model = {
      served_name = "Qwen/Qwen2.5-7B-Instruct"
      path        = "Qwen2.5-7B-Instruct"
      source      = "hf://Qwen/Qwen2.5-7B-Instruct@main"
    }
  }

  expect_failures = [var.model]
}

run "rejects_a_bad_name_and_sizes" {
  command = plan

  variables {
    name               = "Prod_Inference"
    gpu_nodes          = 0
    router_replicas    = 0
    availability_zones = ["us-west-2a"]
  }

  expect_failures = [var.name, var.gpu_nodes, var.router_replicas, var.availability_zones]
}
