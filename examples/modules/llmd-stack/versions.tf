terraform {
  # The provider's floor; hf_token (write-only) needs 1.11, and the tests
  # (mock_provider) need 1.7.
  required_version = ">= 1.5.7"
  required_providers {
    llmd = { source = "llmd-dev/llmd" }
  }
}
