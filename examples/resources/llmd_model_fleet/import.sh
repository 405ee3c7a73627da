# Import by <EKS cluster name>/<namespace>/<name>; the settings are read back from the Deployment.
terraform import llmd_model_fleet.qwen llmd-demo/llmd/qwen
