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
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/llmd-dev/terraform-provider-llmd/internal/image"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// built is the image the tests run (testenv builds it once per test binary,
// written to and read back from its OCI layout).
func built(t *testing.T) (*testenv.Image, v1.Image) {
	t.Helper()
	ti := testenv.RouterImageRootfs(t)
	img, err := image.FromLayout(ti.Layout, ti.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return ti, img
}

// TestTwoBuildsGiveOneDigest builds the image a second time from the same
// checkout, compiling the router again: one commit must give one digest.
func TestTwoBuildsGiveOneDigest(t *testing.T) {
	first, _ := built(t)
	again, _, err := image.FromCheckout(context.Background(), moduleDir(t), first.Config.Labels["org.opencontainers.image.version"])
	if err != nil {
		t.Fatal(err)
	}
	digest, err := again.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if digest != first.Digest {
		t.Fatalf("second build of the same checkout: digest %s, first %s", digest, first.Digest)
	}
}

// TestPushPullByDigestIsIdentical pushes the image to go-containerregistry's
// in-process registry (an in-process stand-in for a real registry, which
// none is reachable here) and pulls it back by digest: manifest, config and
// every layer's bytes must be the same.
func TestPushPullByDigestIsIdentical(t *testing.T) {
	ti, img := built(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	repo := strings.TrimPrefix(srv.URL, "http://") + "/llmd-dev/llmd-router"
	version := ti.Config.Labels["org.opencontainers.image.version"]
	pushed, err := image.Push(context.Background(), repo+":"+version, img, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if pushed != ti.Digest {
		t.Fatalf("pushed %s, built %s", pushed, ti.Digest)
	}
	byDigest, err := name.NewDigest(repo+"@"+ti.Digest.String(), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(byDigest)
	if err != nil {
		t.Fatalf("pull by digest: %v", err)
	}
	if err := validate.Image(pulled); err != nil {
		t.Fatalf("the pulled image does not validate: %v", err)
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
	same("manifest", img.RawManifest, pulled.RawManifest)
	same("config", img.RawConfigFile, pulled.RawConfigFile)
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
			t.Fatalf("layer %s not in the pulled image: %v", d, err)
		}
		same("layer "+d.String(), compressed(l), compressed(pl))
	}
}

// TestDockerTarballHoldsTheImage reads the `docker load` tarball back: the
// same config and layers as the OCI layout (docker's format keeps no OCI
// manifest, so only those can match).
func TestDockerTarballHoldsTheImage(t *testing.T) {
	ti, img := built(t)
	tag, err := name.NewTag(ti.Reference[:strings.Index(ti.Reference, "@")])
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := tarball.ImageFromPath(ti.Tarball, &tag)
	if err != nil {
		t.Fatalf("reading %s as tagged %s: %v", ti.Tarball, tag, err)
	}
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
			t.Errorf("%s: tarball %v, layout %v", what, got, want)
		}
	}
}

// TestImageHoldsTheRouterAndItsLibrariesOnly reads every layer: the files
// are the router, exactly its shared-library closure on this machine, the
// licences of the Debian packages they come from, the CA bundle and the user
// entries; no shell or other program; fixed timestamps, sorted entries.
func TestImageHoldsTheRouterAndItsLibrariesOnly(t *testing.T) {
	ti, img := built(t)
	cfg := ti.Config
	if cfg.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.User)
	}
	if strings.Join(cfg.Entrypoint, " ") != image.BinaryPath+" serve" {
		t.Errorf("entrypoint %q", cfg.Entrypoint)
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
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}

	libs, err := image.SharedLibraries(context.Background(), filepath.Join(ti.Rootfs, image.BinaryPath))
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
