# Import by EKS cluster name; node groups, network and admin access entry are read back.
terraform import llmd_inference_cluster.main llmd-demo
