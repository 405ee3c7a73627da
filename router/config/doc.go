// Package config is the schema of the router's YAML configuration file: which
// pods to route to and how to reach their HTTP, metrics and KV-event sockets,
// how often to scrape load, how the block index is bounded, which scorers
// decide with which weights, and where the router's peer replicas are.
//
// The Terraform provider renders this file from the llmd_prefix_router
// resource, so the package is cgo-free and depends on nothing but
// sigs.k8s.io/yaml: the provider binary must build for every registry
// platform (DESIGN.md decision 5). Parse applies Defaults, rejects unknown
// keys, and Validate names the offending key in every error
// ("scoring.scorers[1].weight: must be >= 0"), so a plan-time check can point
// at the Terraform attribute that produced it.
//
// Scorer parameters are checked by package scoring (scoring.Validate), which
// owns each scorer's parameter list; this package checks the shape only.
package config
