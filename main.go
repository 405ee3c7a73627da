// Command terraform-provider-llmd serves the llmd Terraform provider over plugin
// protocol v6. It is cgo-free and never links ZeroMQ, so it builds for every
// registry platform.
//
// `terraform-provider-llmd -version` prints the release and the router image it
// deploys by default (internal/buildinfo, stamped at release).
//
// `terraform-provider-llmd eks-token --cluster NAME` is a client-go exec
// credential plugin printing an EKS token (internal/ekscredential), which
// llmd_cluster_credentials hands to the kubernetes and helm providers.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo"
	"github.com/llmd-dev/terraform-provider-llmd/internal/ekscredential"
	"github.com/llmd-dev/terraform-provider-llmd/provider"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == ekscredential.Command {
		os.Exit(ekscredential.Main(os.Args[2:]))
	}
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
