# Import by <EKS cluster name>/<namespace>/<name>; the settings are read back from the Deployment.
terraform import llmd_prefix_router.main llmd-demo/llmd/router
