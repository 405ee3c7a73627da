package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestModules runs each module's own `terraform test` files
// (examples/modules/*/tests, with mock_provider "llmd") as a module's
// consumers do, against the provider built from this tree through
// dev_overrides (no registry is reachable), on the newest Terraform and on
// OpenTofu. A failed run fails the test with the CLI's output.
func TestModules(t *testing.T) {
	modules, err := filepath.Glob("examples/modules/*/tests")
	if err != nil || len(modules) == 0 {
		t.Fatalf("no module with tests under examples/modules (%v)", err)
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "terraform-provider-llmd"), ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rc := filepath.Join(dir, "cli.tfrc")
	if err := os.WriteFile(rc, fmt.Appendf(nil, "provider_installation {\n  dev_overrides { \"llmd-dev/llmd\" = %q }\n  direct {}\n}\n", dir), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cli := range []testenv.CLI{testenv.TerraformNewest, testenv.OpenTofu} {
		bin := cli.Binary(t)
		for _, tests := range modules {
			module := filepath.Dir(tests)
			t.Run(cli.String()+"/"+filepath.Base(module), func(t *testing.T) {
				cmd := exec.Command(bin, "test", "-no-color")
				cmd.Dir = module
				cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s test in %s: %v\n%s", cli.Name, module, err, out)
				}
				t.Logf("%s", out)
			})
		}
	}
}
