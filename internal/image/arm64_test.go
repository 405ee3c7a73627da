package image_test

import (
	"debug/elf"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/image"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestARM64ImageIsAnAarch64RouterWithItsLibraries unpacks the index's
// linux/arm64 image and reads its files as the arm64 loader would: the
// router is an aarch64 ELF linking libzmq, and every library it or any
// library names (DT_NEEDED) is an aarch64 file in the image, at a path the
// loader searches. Nothing of this machine's architecture is in it.
func TestARM64ImageIsAnAarch64RouterWithItsLibraries(t *testing.T) {
	ti, idx, _ := built(t)
	img, err := image.ImageFor(idx, image.ARM64)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "arm64" {
		t.Fatalf("the arm64 image's config says %s/%s", cf.OS, cf.Architecture)
	}
	root := ti.ForPlatform(t, image.ARM64).Rootfs

	router := openAarch64(t, root, image.BinaryPath)
	needed, err := router.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(needed, "libzmq.so.5") {
		t.Errorf("the arm64 router does not link libzmq (DT_NEEDED %q): cgo was off", needed)
	}
	var interp string
	for _, p := range router.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if interp == "" {
		t.Fatal("the arm64 router has no PT_INTERP: it is not dynamically linked")
	}
	openAarch64(t, root, interp).Close()
	router.Close()

	// Every ELF file in the image (the router and each library) is aarch64,
	// and each name it needs is a file in a directory the loader searches
	// (or the loader itself, which answers its own name).
	searched := []string{"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib", "/usr/lib"}
	elves := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := elf.Open(p)
		if err != nil {
			return nil // not an ELF file: the CA bundle, passwd, licences
		}
		defer f.Close()
		elves++
		rel := "/" + strings.TrimPrefix(p, root+"/")
		if f.Machine != elf.EM_AARCH64 {
			t.Errorf("%s is an ELF for %s in the arm64 image", rel, f.Machine)
		}
		names, err := f.ImportedLibraries()
		if err != nil {
			t.Errorf("%s: DT_NEEDED: %v", rel, err)
			return nil
		}
		for _, n := range names {
			if n == path.Base(interp) {
				continue
			}
			found := false
			for _, dir := range searched {
				if fi, err := os.Stat(filepath.Join(root, dir, n)); err == nil && fi.Mode().IsRegular() {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s needs %s, which is in none of the image's %v", rel, n, searched)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if elves < 3 {
		t.Fatalf("only %d ELF files in the arm64 image: want the router, the loader and libraries", elves)
	}
}

// TestARM64RouterRunsUnderEmulation starts the arm64 image's router as a
// container would, in the image's own root with none of this machine's
// files, under Debian's qemu-aarch64-static: the loader, libzmq and the rest
// of the closure load and the router answers `version` with this commit.
func TestARM64RouterRunsUnderEmulation(t *testing.T) {
	qemu := testenv.QemuUserStatic(t, image.ARM64)
	ti, _, _ := built(t)
	arm := ti.ForPlatform(t, image.ARM64)
	p := arm.Start(t, testenv.Container{Command: []string{image.BinaryPath, "version"}, Emulator: qemu})
	if err := p.Wait(2 * time.Minute); err != nil {
		t.Fatalf("llmd-router version under qemu: %v\n%s", err, p.Logs())
	}
	want := "llmd-router " + ti.Config.Labels["org.opencontainers.image.version"] + " (commit " + ti.Config.Labels["org.opencontainers.image.revision"] + ", go"
	if !strings.HasPrefix(p.Logs(), want) {
		t.Fatalf("llmd-router version under qemu printed %q, want it to start with %q", p.Logs(), want)
	}
}

func openAarch64(t *testing.T, root, file string) *elf.File {
	t.Helper()
	f, err := elf.Open(filepath.Join(root, file))
	if err != nil {
		t.Fatalf("%s in the arm64 image: %v", file, err)
	}
	if f.Machine != elf.EM_AARCH64 || f.Class != elf.ELFCLASS64 {
		t.Fatalf("%s in the arm64 image is %s %s, want EM_AARCH64 ELFCLASS64", file, f.Class, f.Machine)
	}
	return f
}
