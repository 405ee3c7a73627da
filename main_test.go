package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionFlagPrintsThePinnedImage stamps the provider as a release does
// (.goreleaser.yml's ldflags) and asks it what it pins.
func TestVersionFlagPrintsThePinnedImage(t *testing.T) {
	const pkg = "github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo"
	image := "ghcr.io/llmd-dev/llmd-router:0.1.0@sha256:" + strings.Repeat("0123456789abcdef", 4)
	bin := filepath.Join(t.TempDir(), "terraform-provider-llmd")
	build := exec.Command("go", "build", "-ldflags", "-X "+pkg+".Version=0.1.0 -X "+pkg+".RouterImage="+image, "-o", bin, ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-version").CombinedOutput()
	if err != nil {
		t.Fatalf("-version: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "terraform-provider-llmd 0.1.0 (commit ") || !strings.Contains(string(out), "\nrouter image: "+image+"\n") {
		t.Fatalf("-version printed %q", out)
	}
}
