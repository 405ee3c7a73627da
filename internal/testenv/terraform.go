package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// CLI is one Terraform-compatible command line the provider is tested with,
// built from its Go module (the Go module proxy serves them; no release
// download is reachable here) into the cache, once per version.
type CLI struct {
	// Name is the binary's name and how tests and messages call it.
	Name string
	// Module and Version are the Go module and its version; Main is the
	// package to build within it.
	Module, Version, Main string
	// remoteBackends are the remote-state backends the module registers
	// (internal/backend/remote-state/<name>), which the build drops: no test
	// here uses a remote backend, and their cloud SDKs are a large share of
	// the CLI's compile time.
	remoteBackends []string
	// nestedBackends: the module's go.mod requires those backends as nested
	// modules through replace directives, which the module zip leaves out,
	// so go.mod drops them too (Terraform 1.6 and later).
	nestedBackends bool
	// ldflags are the release linker flags beyond -s -w.
	ldflags string
}

// The CLIs in the provider's test matrix, pinned here and nowhere else
// (docs/index.md names the floor). The preinstalled terraform (1.11.4, on
// TF_ACC_TERRAFORM_PATH) is the fourth row.
var (
	// TerraformNewest is the newest stable Terraform: the whole acceptance
	// suite's, as it has identity (1.12), list resources and actions (1.14).
	TerraformNewest = CLI{Name: "terraform", Module: "github.com/hashicorp/terraform", Version: "1.15.9", Main: ".",
		remoteBackends: slices.Concat(remoteStateBackends, []string{"oci"}), nestedBackends: true, ldflags: "-X github.com/hashicorp/terraform/version.dev=no"}
	// TerraformFloor is the oldest supported Terraform: the last
	// MPL-licensed release, where many organisations froze, and the floor of
	// terraform-aws-modules/eks v21. Write-only attributes (1.11) are refused
	// there with an error naming the attribute and the version.
	TerraformFloor = CLI{Name: "terraform", Module: "github.com/hashicorp/terraform", Version: "1.5.7", Main: ".",
		remoteBackends: remoteStateBackends}
	// OpenTofu is the newest OpenTofu (ephemeral and write-only attributes;
	// no actions or list resources).
	OpenTofu = CLI{Name: "tofu", Module: "github.com/opentofu/opentofu", Version: "1.11.0", Main: "./cmd/tofu",
		remoteBackends: remoteStateBackends, ldflags: "-X github.com/opentofu/opentofu/version.dev=no"}
)

// PreinstalledTerraformEnv names the preinstalled terraform (1.11.4), the
// matrix's fourth row, while TF_ACC_TERRAFORM_PATH points the suite at
// TerraformNewest; `make test` sets both.
const PreinstalledTerraformEnv = "LLMD_TEST_TERRAFORM_PREINSTALLED"

// PreinstalledTerraform returns the preinstalled terraform's path. Unset,
// it skips the test outside CI and fails it in CI.
func PreinstalledTerraform(t testing.TB) string {
	t.Helper()
	path := os.Getenv(PreinstalledTerraformEnv)
	if path == "" {
		unavailable(t, "the preinstalled terraform", fmt.Errorf("%s is not set", PreinstalledTerraformEnv),
			"make test sets it to the terraform on PATH")
	}
	return path
}

// remoteStateBackends are the remote-state backends every CLI of the
// matrix registers (Terraform 1.15 adds oci).
var remoteStateBackends = []string{"azure", "consul", "cos", "gcs", "kubernetes", "oss", "pg", "s3"}

// backendLines matches, in internal/backend/init/init.go, the import and
// the registration line of each of the backends (their import aliases are
// backendAzure, backendGCS, backendS3 and so on).
func backendLines(backends []string) *regexp.Regexp {
	return regexp.MustCompile(`(?mi)^.*\bbackend(` + strings.Join(backends, "|") + `)\b.*\n`)
}

// String is the CLI as messages name it, e.g. "terraform 1.5.7".
func (c CLI) String() string { return c.Name + " " + c.Version }

var (
	cliMu    sync.Mutex
	cliPaths = map[string]string{} // by CLI.String
	cliErrs  = map[string]error{}
)

// Binary returns the CLI's path, building it on first use. A missing binary
// skips the test outside CI and fails it in CI, where `make testenv` builds
// it.
func (c CLI) Binary(t testing.TB) string {
	t.Helper()
	cliMu.Lock()
	key := c.String()
	path, done := cliPaths[key]
	err := cliErrs[key]
	if !done && err == nil {
		path, err = c.Path()
		cliPaths[key], cliErrs[key] = path, err
	}
	cliMu.Unlock()
	if err != nil {
		unavailable(t, c.String(), err, "make testenv")
	}
	return path
}

// Terraform returns the path of TerraformNewest (see CLI.Binary).
func Terraform(t testing.TB) string {
	t.Helper()
	return TerraformNewest.Binary(t)
}

// Path builds the CLI from a copy of its module source (`go install` refuses
// a module with replace directives) into the cache, with release linker
// flags, so its version command names the release and not -dev. A cold
// build takes 2-3 minutes of CPU on 2 cores.
func (c CLI) Path() (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, c.Name+"-"+c.Version)
	bin := filepath.Join(dir, c.Name)
	err = withFileLock(dir+".lock", func() error {
		if _, err := os.Stat(bin); err == nil {
			return nil
		}
		src := filepath.Join(dir, "src")
		if err := os.RemoveAll(src); err != nil {
			return err
		}
		if err := c.source(src); err != nil {
			return err
		}
		cmd := exec.Command("go", partBuild("build", c.ldflags, "-o", bin+".tmp", c.Main)...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s in %s: %w\n%s", c, src, err, out)
		}
		if err := os.Rename(bin+".tmp", bin); err != nil {
			return err
		}
		return os.RemoveAll(src)
	})
	return bin, err
}

// source writes the CLI's module source to dst, writable, with the
// remote-state backends dropped where the module needs that.
func (c CLI) source(dst string) error {
	dir, err := moduleDir(c.Module, "v"+c.Version)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	// The module cache is read-only: copy, then make the copy writable.
	if out, err := exec.Command("cp", "-r", dir, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("copying %s: %w\n%s", dir, err, out)
	}
	if out, err := exec.Command("chmod", "-R", "u+w", dst).CombinedOutput(); err != nil {
		return fmt.Errorf("chmod %s: %w\n%s", dst, err, out)
	}
	if c.nestedBackends {
		args := []string{"mod", "edit"}
		for _, b := range c.remoteBackends {
			p := c.Module + "/internal/backend/remote-state/" + b
			args = append(args, "-droprequire", p, "-dropreplace", p)
		}
		args = append(args, "-droprequire", c.Module+"/internal/legacy", "-dropreplace", c.Module+"/internal/legacy")
		cmd := exec.Command("go", args...)
		cmd.Dir = dst
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("dropping the remote-state backends from %s/go.mod: %w\n%s", dst, err, out)
		}
	}
	initGo := filepath.Join(dst, "internal", "backend", "init", "init.go")
	b, err := os.ReadFile(initGo)
	if err != nil {
		return err
	}
	// Each backend has an import and a registration line, and init.go is
	// the only importer (so the build compiles none of their SDKs).
	lines := backendLines(c.remoteBackends)
	if found, want := len(lines.FindAll(b, -1)), 2*len(c.remoteBackends); found != want {
		return fmt.Errorf("%s: found %d remote-state backend lines, want %d: the recipe needs updating for %s",
			initGo, found, want, c)
	}
	return os.WriteFile(initGo, lines.ReplaceAll(b, nil), 0o644)
}
