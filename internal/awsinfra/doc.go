// Package awsinfra is the aws-sdk-go-v2 side of the provider: configuration and
// clients built from the provider settings, and (in later files) the
// orchestration of VPC, IAM, EKS, node groups and FSx with their waiters. It
// holds no Terraform types, so it can be driven by tests and tools directly.
package awsinfra
