// Command testenv-prepare builds or fetches every part internal/testenv starts
// (control-plane binary, kwok, npm test data) into the cache, printing how long
// each took, so a test run never spends its own timeout on a cold build.
package main

import (
	"fmt"
	"os"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

func main() {
	if err := testenv.Prepare(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testenv-prepare:", err)
		os.Exit(1)
	}
}
