// Command testenv-prepare builds or fetches every part internal/testenv starts
// (control-plane binary, kwok, npm test data, Terraform) into the cache,
// printing how long each took, so a test run never spends its own timeout on
// a cold build. With -terraform it prepares only Terraform and prints its
// path (for `make docs`, whose tfplugindocs needs Terraform 1.12+ to read
// identity schemas).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

func main() {
	terraform := flag.Bool("terraform", false, "prepare only "+testenv.TerraformNewest.String()+" and print its path")
	flag.Parse()
	if *terraform {
		path, err := testenv.TerraformNewest.Path()
		if err != nil {
			fmt.Fprintln(os.Stderr, "testenv-prepare:", err)
			os.Exit(1)
		}
		fmt.Println(path)
		return
	}
	if err := testenv.Prepare(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testenv-prepare:", err)
		os.Exit(1)
	}
}
