# Import by <EKS cluster name>/<namespace>/<name>; the settings are read back
# from the Deployment, the connection from the EKS cluster in the provider's region.
terraform import llmd_model_fleet.qwen llmd-demo/llmd/qwen
