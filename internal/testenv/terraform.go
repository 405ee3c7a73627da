package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
)

// TerraformVersion is the newest Terraform the provider is tested with: the
// tests of what Terraform 1.12 and later added (resource identity, import by
// identity) run on it. The preinstalled CLI (TF_ACC_TERRAFORM_PATH, 1.11.4)
// runs the rest.
const TerraformVersion = "1.15.9"

// remoteStateBackends are the remote-state backends Terraform's module
// registers from nested modules, which its module zip leaves out (they are
// replace directives to ./internal/...), and internal/legacy, which only
// they import. The build drops them; no test here uses a remote backend.
var remoteStateBackends = []string{"azure", "consul", "cos", "gcs", "kubernetes", "oci", "oss", "pg", "s3"}

// backendRegistration matches, in internal/backend/init/init.go, the import
// and the registration line of each dropped backend.
var backendRegistration = regexp.MustCompile(`(?m)^.*\bbackend(Azure|Consul|Cos|GCS|Kubernetes|OCI|OSS|Pg|S3)\b.*\n`)

var (
	terraformOnce sync.Once
	terraformBin  string
	terraformErr  error
)

// Terraform returns the path of Terraform TerraformVersion, building it on
// first use. A missing binary skips the test outside CI and fails it in CI,
// where `make testenv` builds it.
func Terraform(t testing.TB) string {
	t.Helper()
	terraformOnce.Do(func() { terraformBin, terraformErr = TerraformPath() })
	if terraformErr != nil {
		unavailable(t, "terraform "+TerraformVersion, terraformErr, "make testenv")
	}
	return terraformBin
}

// TerraformPath builds Terraform from its module (the Go module proxy serves
// it; `go install` refuses a module with replace directives) into the cache:
// a copy of the module source without the remote-state backends, built with
// release linker flags, so `terraform version` says 1.15.9 and not -dev. A
// cold build takes about 3 minutes of CPU on 2 cores.
func TerraformPath() (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "terraform-"+TerraformVersion)
	bin := filepath.Join(dir, "terraform")
	err = withFileLock(dir+".lock", func() error {
		if _, err := os.Stat(bin); err == nil {
			return nil
		}
		src := filepath.Join(dir, "src")
		if err := os.RemoveAll(src); err != nil {
			return err
		}
		if err := terraformSource(src); err != nil {
			return err
		}
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X github.com/hashicorp/terraform/version.dev=no", "-o", bin+".tmp", ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building terraform %s in %s: %w\n%s", TerraformVersion, src, err, out)
		}
		if err := os.Rename(bin+".tmp", bin); err != nil {
			return err
		}
		return os.RemoveAll(src)
	})
	return bin, err
}

// terraformSource writes the module source of Terraform TerraformVersion to
// dst, with the remote-state backends dropped from its go.mod and from the
// backend registry.
func terraformSource(dst string) error {
	dir, err := moduleDir("github.com/hashicorp/terraform", "v"+TerraformVersion)
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
	args := []string{"mod", "edit"}
	for _, b := range remoteStateBackends {
		p := "github.com/hashicorp/terraform/internal/backend/remote-state/" + b
		args = append(args, "-droprequire", p, "-dropreplace", p)
	}
	args = append(args, "-droprequire", "github.com/hashicorp/terraform/internal/legacy", "-dropreplace", "github.com/hashicorp/terraform/internal/legacy")
	cmd := exec.Command("go", args...)
	cmd.Dir = dst
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("dropping the remote-state backends from %s/go.mod: %w\n%s", dst, err, out)
	}
	initGo := filepath.Join(dst, "internal", "backend", "init", "init.go")
	b, err := os.ReadFile(initGo)
	if err != nil {
		return err
	}
	// Each backend has an import and a registration line.
	if found, want := len(backendRegistration.FindAll(b, -1)), 2*len(remoteStateBackends); found != want {
		return fmt.Errorf("%s: found %d remote-state backend lines, want %d: the recipe needs updating for terraform %s",
			initGo, found, want, TerraformVersion)
	}
	return os.WriteFile(initGo, backendRegistration.ReplaceAll(b, nil), 0o644)
}
