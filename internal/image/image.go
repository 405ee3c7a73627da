// Package image builds the router image without a container daemon: one OCI
// image index with an image for each of Platforms (linux/amd64, linux/arm64),
// each holding the llmd-router binary for that architecture (cgo, linked
// against Debian's libzmq for it: arm64 is cross-compiled against Debian's
// multiarch arm64 packages), exactly the shared libraries its loader maps for
// it (read from the ELF files, so it works across architectures), Debian's CA
// bundle and a passwd and group entry for the non-root user 65532. There is
// no shell and no package manager; the entrypoint is `llmd-router serve`.
//
// The same inputs give the same digests: every timestamp is the commit time,
// tar entries are sorted and carry numeric owners only, and the binary is built
// with -trimpath. `make image` drives it (cmd/router-image) and the tests run
// what it builds (internal/testenv.RouterImageRootfs).
//
// Layers, from least to most often changed, so a registry keeps the first two
// across releases that change only the router:
//
//  1. base: /etc/passwd, /etc/group, the CA bundle, /home/nonroot, /tmp
//  2. libraries: the loader and the shared-library closure, with the Debian
//     copyright file of every package they come from
//  3. router: /usr/local/bin/llmd-router
package image

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

const (
	// UID is the user (and group) the router runs as: "nonroot" by the
	// distroless convention, so cluster policies that allow it know it.
	UID = 65532
	// BinaryPath is where the image holds llmd-router.
	BinaryPath = "/usr/local/bin/llmd-router"
	// HomeDir is the user's home and the working directory.
	HomeDir = "/home/nonroot"
	// DefaultCABundle is Debian's bundle from ca-certificates, which Go's
	// crypto/x509 reads at this path on Linux.
	DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"
	// Source is the repository the image is built from (the source label).
	Source = "https://github.com/llmd-dev/terraform-provider-llmd"
)

// Spec is everything one image is built from.
type Spec struct {
	// Binary is llmd-router as BuildRouter builds it.
	Binary string
	// Version is the release (the version label and the image tag).
	Version string
	// Revision is the commit (the revision label).
	Revision string
	// Created stamps every file and the image itself: the commit time, so
	// one commit gives one digest.
	Created time.Time
	// CABundle is the CA certificates file; empty means DefaultCABundle.
	CABundle string
	// Platform is what Binary was built for; its shared libraries come
	// from this machine's Debian packages for that architecture.
	Platform Platform
}

// Build assembles the image for one platform from spec. It reads the binary's
// library closure from this machine's packages for that platform, so the
// image is built where the binary was.
func Build(ctx context.Context, spec Spec) (v1.Image, error) {
	if spec.Binary == "" || spec.Version == "" || spec.Revision == "" {
		return nil, fmt.Errorf("image spec needs Binary, Version and Revision (got %q, %q, %q)", spec.Binary, spec.Version, spec.Revision)
	}
	if spec.Created.IsZero() {
		return nil, fmt.Errorf("image spec needs Created (the commit time, for a reproducible digest)")
	}
	if err := spec.Platform.validate(); err != nil {
		return nil, err
	}
	if spec.CABundle == "" {
		spec.CABundle = DefaultCABundle
	}
	base, baseBy, err := baseTree(ctx, spec.CABundle)
	if err != nil {
		return nil, err
	}
	libs, libsBy, err := libraryTree(ctx, spec.Binary, spec.Platform)
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(spec.Binary)
	if err != nil {
		return nil, fmt.Errorf("reading the router binary: %w", err)
	}
	router := newTree()
	router.file(BinaryPath, 0o755, bin)

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	created := v1.Time{Time: spec.Created.UTC()}
	for _, l := range []struct {
		t  *tree
		by string
	}{{base, baseBy}, {libs, libsBy}, {router, "llmd-router " + spec.Version + " (" + spec.Revision + ")"}} {
		layer, err := l.t.layer(spec.Created)
		if err != nil {
			return nil, fmt.Errorf("building layer %q: %w", l.by, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
			History: v1.History{Created: created, CreatedBy: l.by, Comment: "built by internal/image"}})
		if err != nil {
			return nil, fmt.Errorf("adding layer %q: %w", l.by, err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = spec.Platform.GOARCH
	cf.OS = "linux"
	cf.Created = created
	_, port, err := net.SplitHostPort(config.DefaultListen)
	if err != nil {
		return nil, fmt.Errorf("router default listen address %q: %w", config.DefaultListen, err)
	}
	cf.Config = v1.Config{
		Entrypoint:   []string{BinaryPath, "serve"},
		User:         fmt.Sprintf("%d:%d", UID, UID),
		WorkingDir:   HomeDir,
		Env:          []string{"PATH=/usr/local/bin", "HOME=" + HomeDir},
		ExposedPorts: map[string]struct{}{port + "/tcp": {}},
		Labels:       Labels(spec),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting the image config: %w", err)
	}
	return img, nil
}

// Labels are the image's OCI annotations (also set as config labels, where
// `docker inspect` and registries' UIs show them).
func Labels(spec Spec) map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.revision":    spec.Revision,
		"org.opencontainers.image.version":     spec.Version,
		"org.opencontainers.image.created":     spec.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.title":       "llmd-router",
		"org.opencontainers.image.description": "prefix-cache-aware router for vLLM fleets (llmd)",
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

// baseTree holds the user, the CA bundle and the writable directories.
func baseTree(ctx context.Context, caBundle string) (*tree, string, error) {
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return nil, "", fmt.Errorf("reading the CA bundle (Debian: apt-get install ca-certificates): %w", err)
	}
	t := newTree()
	// No login shell exists in the image; nologin names that intent.
	t.file("/etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", UID, UID, HomeDir)))
	t.file("/etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", UID)))
	t.file(DefaultCABundle, 0o644, ca)
	t.dir(HomeDir, 0o700, UID)
	t.dir("/tmp", 0o1777, 0)
	v, err := packageVersions(ctx, []string{"ca-certificates"})
	if err != nil {
		return nil, "", err
	}
	return t, "passwd, group, CA bundle from Debian ca-certificates " + v["ca-certificates"], nil
}

// libraryTree holds the binary's shared-library closure at the paths the
// loader opens, each the file's resolved content (no symlinks to follow), and
// the copyright file of each Debian package they come from.
func libraryTree(ctx context.Context, binary string, p Platform) (*tree, string, error) {
	libs, err := SharedLibraries(binary, p)
	if err != nil {
		return nil, "", err
	}
	pkgs, err := debianPackages(ctx, libs)
	if err != nil {
		return nil, "", err
	}
	t := newTree()
	seen := map[debianPackage]bool{}
	for _, lib := range libs {
		body, err := os.ReadFile(lib)
		if err != nil {
			return nil, "", fmt.Errorf("reading shared library: %w", err)
		}
		fi, err := os.Stat(lib)
		if err != nil {
			return nil, "", err
		}
		t.file(lib, int64(fi.Mode().Perm()), body)
		pkg := pkgs[lib]
		if seen[pkg] {
			continue
		}
		seen[pkg] = true
		copyright, err := os.ReadFile(pkg.copyrightPath())
		if err != nil {
			return nil, "", fmt.Errorf("reading the licence of %s, which %s comes from: %w", pkg.Name, lib, err)
		}
		t.file(pkg.copyrightPath(), 0o644, copyright)
	}
	var names []string
	for pkg := range seen {
		names = append(names, pkg.Name+" "+pkg.Version)
	}
	sort.Strings(names)
	return t, "shared libraries from Debian: " + strings.Join(names, ", "), nil
}
