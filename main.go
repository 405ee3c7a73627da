// Command terraform-provider-llmd serves the llmd Terraform provider over plugin
// protocol v6. It is cgo-free and never links ZeroMQ, so it builds for every
// registry platform.
//
// `terraform-provider-llmd -version` prints the release and the router image it
// deploys by default (internal/buildinfo, stamped at release).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo"
	"github.com/llmd-dev/terraform-provider-llmd/provider"
)

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers like delve")
	version := flag.Bool("version", false, "print the version and the router image this build pins, then exit")
	flag.Parse()
	if *version {
		fmt.Println(buildinfo.Provider())
		return
	}
	err := providerserver.Serve(context.Background(), provider.New(buildinfo.Version), providerserver.ServeOpts{
		Address: "registry.terraform.io/llmd-dev/llmd",
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
