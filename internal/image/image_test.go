package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/llmd-dev/terraform-provider-llmd/internal/image"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// built is the image index the tests run and this machine's image in it
// (testenv builds them once per test binary, written to and read back from
// the OCI layout).
func built(t *testing.T) (*testenv.Image, v1.ImageIndex, v1.Image) {
	t.Helper()
	ti := testenv.RouterImageRootfs(t)
	idx, err := image.FromLayout(ti.Layout, ti.Index)
	if err != nil {
		t.Fatal(err)
	}
	img, err := idx.Image(ti.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return ti, idx, img
}

// TestTwoBuildsGiveOneDigest builds the image index a second time from the
// same checkout, compiling the router again for every platform: one commit
// must give one index digest, and so the same image for each platform.
func TestTwoBuildsGiveOneDigest(t *testing.T) {
	first, firstIdx, _ := built(t)
	again, _, err := image.FromCheckout(context.Background(), moduleDir(t), first.Config.Labels["org.opencontainers.image.version"])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range image.Platforms {
		a, err := image.ImageFor(firstIdx, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := image.ImageFor(again, p)
		if err != nil {
			t.Fatal(err)
		}
		da, _ := a.Digest()
		db, _ := b.Digest()
		if da != db {
			t.Errorf("%s: second build's image %s, first %s", p, db, da)
		}
	}
	digest, err := again.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if digest != first.Index {
		t.Fatalf("second build of the same checkout: index digest %s, first %s", digest, first.Index)
	}
}

// TestIndexListsAmd64AndArm64 reads the index as a node's runtime does: an
// OCI index of two OCI image manifests, one per platform, each platform
// matching the architecture its image's config names.
func TestIndexListsAmd64AndArm64(t *testing.T) {
	_, idx, _ := built(t)
	if err := validate.Index(idx); err != nil {
		t.Fatalf("the index does not validate: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", m.MediaType, types.OCIImageIndex)
	}
	var platforms []string
	for _, d := range m.Manifests {
		if d.MediaType != types.OCIManifestSchema1 || d.Platform == nil {
			t.Fatalf("index entry %s: media type %s, platform %v", d.Digest, d.MediaType, d.Platform)
		}
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture {
			t.Errorf("index lists %s as %s, its config says %s/%s", d.Digest, d.Platform, cf.OS, cf.Architecture)
		}
	}
	if got := strings.Join(platforms, " "); got != "linux/amd64 linux/arm64" {
		t.Fatalf("index platforms %q, want linux/amd64 linux/arm64", got)
	}
}

// TestPushPullByDigestIsIdentical pushes the image to go-containerregistry's
// in-process registry (an in-process stand-in for a real registry, which
// none is reachable here) and pulls it back by digest: manifest, config and
// every layer's bytes must be the same.
func TestPushPullByDigestIsIdentical(t *testing.T) {
	ti, idx, _ := built(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	repo := strings.TrimPrefix(srv.URL, "http://") + "/llmd-dev/llmd-router"
	version := ti.Config.Labels["org.opencontainers.image.version"]
	pushed, err := image.Push(context.Background(), repo+":"+version, idx, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if pushed != ti.Index {
		t.Fatalf("pushed %s, built %s", pushed, ti.Index)
	}
	byDigest, err := name.NewDigest(repo+"@"+ti.Index.String(), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulledIdx, err := remote.Index(byDigest)
	if err != nil {
		t.Fatalf("pull by digest: %v", err)
	}
	if err := validate.Index(pulledIdx); err != nil {
		t.Fatalf("the pulled index does not validate: %v", err)
	}
	same := func(what string, a, b func() ([]byte, error)) {
		x, err := a()
		if err != nil {
			t.Fatal(err)
		}
		y, err := b()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs after push and pull", what)
		}
	}
	same("index", idx.RawManifest, pulledIdx.RawManifest)
	for _, p := range image.Platforms {
		img, err := image.ImageFor(idx, p)
		if err != nil {
			t.Fatal(err)
		}
		pulled, err := image.ImageFor(pulledIdx, p)
		if err != nil {
			t.Fatal(err)
		}
		same(p.String()+" manifest", img.RawManifest, pulled.RawManifest)
		same(p.String()+" config", img.RawConfigFile, pulled.RawConfigFile)
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range layers {
			d, err := l.Digest()
			if err != nil {
				t.Fatal(err)
			}
			pl, err := pulled.LayerByDigest(d)
			if err != nil {
				t.Fatalf("%s layer %s not in the pulled image: %v", p, d, err)
			}
			same(p.String()+" layer "+d.String(), compressed(l), compressed(pl))
		}
	}
}

// TestDockerTarballsHoldTheImages reads each platform's `docker load`
// tarball back: the same config and layers as that platform's image in the
// OCI layout (docker's format keeps no OCI manifest, so only those can
// match).
func TestDockerTarballsHoldTheImages(t *testing.T) {
	ti, idx, _ := built(t)
	tag, err := name.NewTag(ti.Reference[:strings.Index(ti.Reference, "@")])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range image.Platforms {
		img, err := image.ImageFor(idx, p)
		if err != nil {
			t.Fatal(err)
		}
		loaded, err := tarball.ImageFromPath(ti.Tarballs[p.GOARCH], &tag)
		if err != nil {
			t.Fatalf("reading %s's tarball %q as tagged %s: %v", p, ti.Tarballs[p.GOARCH], tag, err)
		}
		sameConfigAndLayers(t, p, img, loaded)
	}
}

func sameConfigAndLayers(t *testing.T, p image.Platform, img, loaded v1.Image) {
	t.Helper()
	for what, get := range map[string]func(v1.Image) (any, error){
		"config digest": func(i v1.Image) (any, error) { return i.ConfigName() },
		"layer diff IDs": func(i v1.Image) (any, error) {
			cf, err := i.ConfigFile()
			if err != nil {
				return nil, err
			}
			return cf.RootFS.DiffIDs, nil
		},
	} {
		want, err := get(img)
		if err != nil {
			t.Fatal(err)
		}
		got, err := get(loaded)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s %s: tarball %v, layout %v", p, what, got, want)
		}
	}
}

// TestImageHoldsTheRouterAndItsLibrariesOnly reads every layer: the files
// are the router, exactly its shared-library closure on this machine, the
// licences of the Debian packages they come from, the CA bundle and the user
// entries; no shell or other program; fixed timestamps, sorted entries.
func TestImageHoldsTheRouterAndItsLibrariesOnly(t *testing.T) {
	ti, _, img := built(t)
	cfg := ti.Config
	if cfg.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.User)
	}
	if strings.Join(cfg.Entrypoint, " ") != image.BinaryPath+" serve" {
		t.Errorf("entrypoint %q", cfg.Entrypoint)
	}
	// The A/B benchmark's Job runs the binary by this path (its command).
	if image.BinaryPath != workloads.RouterBinary {
		t.Errorf("the image holds llmd-router at %s, the benchmark Job runs %s", image.BinaryPath, workloads.RouterBinary)
	}
	for _, k := range []string{"source", "revision", "version"} {
		if cfg.Labels["org.opencontainers.image."+k] == "" {
			t.Errorf("label org.opencontainers.image.%s missing: %v", k, cfg.Labels)
		}
	}
	out, err := exec.Command("git", "-C", moduleDir(t), "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	if rev := strings.TrimSpace(string(out)); cfg.Labels["org.opencontainers.image.revision"] != rev {
		t.Errorf("revision label %q, checkout at %s", cfg.Labels["org.opencontainers.image.revision"], rev)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	native, err := image.NativePlatform()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != native.GOARCH {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}

	libs, err := image.SharedLibraries(filepath.Join(ti.Rootfs, image.BinaryPath), native)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"etc/passwd": true, "etc/group": true, "etc/ssl/certs/ca-certificates.crt": true,
		strings.TrimPrefix(image.BinaryPath, "/"): true}
	for _, l := range libs {
		want[strings.TrimPrefix(l, "/")] = true
	}
	files := map[string]tar.Header{}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, h.Name)
			if !h.ModTime.Equal(cf.Created.Time) {
				t.Errorf("layer %d: %s has mtime %v, want the commit time %v", i+1, h.Name, h.ModTime, cf.Created.Time)
			}
			if h.Uname != "" || h.Gname != "" || len(h.PAXRecords) > 0 {
				t.Errorf("layer %d: %s carries host metadata (owner names %q/%q, PAX %v)", i+1, h.Name, h.Uname, h.Gname, h.PAXRecords)
			}
			if h.Typeflag == tar.TypeReg {
				files[h.Name] = *h
			}
		}
		rc.Close()
		if !sort.StringsAreSorted(names) {
			t.Errorf("layer %d: entries not sorted: %q", i+1, names)
		}
	}
	for f := range want {
		if _, ok := files[f]; !ok {
			t.Errorf("image lacks %s", f)
		}
	}
	for f, h := range files {
		switch {
		case want[f]:
		case strings.HasPrefix(f, "usr/share/doc/") && path.Base(f) == "copyright":
		default:
			t.Errorf("image holds %s, which is neither the router, a library it loads, a licence nor user/CA data", f)
		}
		if h.FileInfo().Mode()&0o111 != 0 && f != strings.TrimPrefix(image.BinaryPath, "/") && !strings.Contains(path.Base(f), ".so") {
			t.Errorf("image holds the executable %s", f)
		}
	}
	for _, shell := range []string{"bin/sh", "usr/bin/sh", "bin/bash", "bin/dash", "bin/busybox"} {
		if _, err := os.Lstat(filepath.Join(ti.Rootfs, shell)); err == nil {
			t.Errorf("the image holds a shell: /%s", shell)
		}
	}
	passwd, err := os.ReadFile(filepath.Join(ti.Rootfs, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no entry for 65532:\n%s", passwd)
	}
}

// TestSharedLibrariesIsWhatTheLoaderMaps compares the closure the image
// build reads from the ELF files with what glibc's loader itself maps for the
// image's router on this machine (ldd runs it with LD_TRACE_LOADED_OBJECTS):
// the same paths, libzmq among them.
func TestSharedLibrariesIsWhatTheLoaderMaps(t *testing.T) {
	ti, _, _ := built(t)
	native, err := image.NativePlatform()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(ti.Rootfs, image.BinaryPath)
	got, err := image.SharedLibraries(bin, native)
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
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
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
	if !slices.ContainsFunc(got, func(p string) bool { return path.Base(p) == "libzmq.so.5" }) {
		t.Fatalf("the router's closure %q has no libzmq", got)
	}
}

func moduleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func compressed(l v1.Layer) func() ([]byte, error) {
	return func() ([]byte, error) {
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
}
