// Command terraform-provider-llmd serves the llmd Terraform provider over plugin
// protocol v6. It is cgo-free and never links ZeroMQ, so it builds for every
// registry platform.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/llmd-dev/terraform-provider-llmd/provider"
)

// version is set at release time (goreleaser ldflags) and names the router image tag the provider pins.
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers like delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/llmd-dev/llmd",
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
