package image

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSharedLibrariesRefusesAStaticOrForeignBinary: a binary without a
// loader (cgo off) or of another machine has no closure to ship.
func TestSharedLibrariesRefusesAStaticOrForeignBinary(t *testing.T) {
	native, err := NativePlatform()
	if err != nil {
		t.Fatal(err)
	}
	other := ARM64
	if native == ARM64 {
		other = AMD64
	}
	bin := filepath.Join(t.TempDir(), "static")
	build := exec.Command("go", "build", "-o", bin, "./cmd/router-image")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if _, err := SharedLibraries(bin, native); err == nil || !strings.Contains(err.Error(), "not dynamically linked") {
		t.Errorf("SharedLibraries of a static binary: %v, want an error saying it is not dynamically linked", err)
	}
	if _, err := SharedLibraries(bin, other); err == nil || !strings.Contains(err.Error(), "is an ELF for") {
		t.Errorf("SharedLibraries of a %s binary as %s: %v, want an error naming both machines", native, other, err)
	}
}
