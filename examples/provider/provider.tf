provider "llmd" {
  region = "us-west-2"

  default_tags {
    tags = {
      team = "inference"
    }
  }
}
