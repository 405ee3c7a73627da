package image

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSharedLibrariesIsWhatTheLoaderMaps compares the closure read from the
// ELF files with what glibc's loader itself maps for the same binary (ldd
// runs it with LD_TRACE_LOADED_OBJECTS): the same paths. It needs a binary
// of this machine's platform that links libzmq, so it builds the router.
func TestSharedLibrariesIsWhatTheLoaderMaps(t *testing.T) {
	native, err := NativePlatform()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "llmd-router")
	if err := BuildRouter(t.Context(), strings.TrimSpace(string(dir)), bin, "test", "test", native); err != nil {
		t.Fatal(err)
	}
	got, err := SharedLibraries(bin, native)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("ldd: %v\n%s", err, out)
	}
	// ldd's lines: "soname => /path (addr)", "/loader (addr)", and the
	// vDSO as "soname (addr)", which no file backs.
	var want []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(after)
		}
		p, _, _ := strings.Cut(line, " (")
		if filepath.IsAbs(p) && !slices.Contains(want, p) {
			want = append(want, p)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("SharedLibraries = %q\nldd maps      %q", got, want)
	}
	if !slices.ContainsFunc(got, func(p string) bool { return filepath.Base(p) == "libzmq.so.5" }) {
		t.Fatalf("the router's closure %q has no libzmq", got)
	}
}

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
