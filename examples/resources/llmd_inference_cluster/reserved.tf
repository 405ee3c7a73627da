# GPU nodes on reserved capacity first: the On-Demand Capacity Reservation
# tagged pool = llm (4 x g5.xlarge in us-west-2a), the nodes beyond its free
# count On-Demand. Bottlerocket NVIDIA carries the device plugin, so
# addons.nvidia_device_plugin defaults off.
resource "llmd_inference_cluster" "reserved" {
  name = "llmd-reserved"

  gpu_node_group = {
    instance_type = "g5.xlarge"
    ami_type      = "BOTTLEROCKET_x86_64_NVIDIA"
    desired_size  = 4
    min_size      = 4
    max_size      = 4
    capacity_reservation = {
      tags     = { pool = "llm" }
      fallback = "on_demand"
    }
  }

  model_storage = {
    availability_zone = "us-west-2a" # the reservation's zone: the GPU nodes sit beside the file system
  }
}

# A Capacity Block instead: capacity_type CAPACITY_BLOCK, no fallback, and 0
# nodes until its window opens.
#
#   gpu_node_group = {
#     instance_type        = "p5.48xlarge"
#     capacity_type        = "CAPACITY_BLOCK"
#     desired_size         = 0
#     min_size             = 0
#     max_size             = 2
#     capacity_reservation = { id = "cr-0123456789abcdef0" }
#   }
