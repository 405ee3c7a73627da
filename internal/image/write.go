package image

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Output is where Write put the image.
type Output struct {
	// Layout is an OCI image layout directory holding the image index,
	// tagged (org.opencontainers.image.ref.name) with the version.
	Layout string
	// Tarballs are each platform's image as `docker load` reads it, tagged
	// repository:version (docker's tarball holds one platform), keyed by
	// GOARCH.
	Tarballs map[string]string
	// Digest is the image index's digest.
	Digest v1.Hash
	// Reference is repository:version@sha256:<index digest>, the form the
	// provider pins: a node pulls its own architecture's image through it.
	Reference string
	// ReferenceFile holds Reference and a newline, for the release build to stamp.
	ReferenceFile string
}

// TarballName is the file Write gives p's `docker load` tarball.
func TarballName(p Platform) string { return "llmd-router_linux_" + p.GOARCH + ".tar" }

// Write replaces dir with the image index in both forms and its pinned
// reference.
func Write(dir string, idx v1.ImageIndex, repository, version string) (Output, error) {
	tag, err := name.NewTag(repository+":"+version, name.StrictValidation)
	if err != nil {
		return Output{}, fmt.Errorf("image tag %s:%s (the version must be a valid tag: letters, digits, '_', '.', '-'): %w", repository, version, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return Output{}, fmt.Errorf("image index digest: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return Output{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Output{}, err
	}
	out := Output{
		Layout:        filepath.Join(dir, "oci"),
		Tarballs:      map[string]string{},
		Digest:        digest,
		Reference:     tag.String() + "@" + digest.String(),
		ReferenceFile: filepath.Join(dir, "reference"),
	}
	p, err := layout.Write(out.Layout, empty.Index)
	if err != nil {
		return Output{}, fmt.Errorf("writing OCI layout %s: %w", out.Layout, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": version})); err != nil {
		return Output{}, fmt.Errorf("writing the image index to %s: %w", out.Layout, err)
	}
	for _, pl := range Platforms {
		img, err := ImageFor(idx, pl)
		if err != nil {
			return Output{}, err
		}
		file := filepath.Join(dir, TarballName(pl))
		if err := tarball.WriteToFile(file, tag, img); err != nil {
			return Output{}, fmt.Errorf("writing %s: %w", file, err)
		}
		out.Tarballs[pl.GOARCH] = file
	}
	if err := os.WriteFile(out.ReferenceFile, []byte(out.Reference+"\n"), 0o644); err != nil {
		return Output{}, err
	}
	return out, nil
}

// FromLayout reads the image index with digest back from an OCI layout.
func FromLayout(dir string, digest v1.Hash) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("opening OCI layout %s: %w", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading OCI layout %s: %w", dir, err)
	}
	img, err := idx.ImageIndex(digest)
	if err != nil {
		return nil, fmt.Errorf("image index %s in %s: %w", digest, dir, err)
	}
	return img, nil
}

// Summary lists, for each platform in the index, the image's digest and
// layers (digest, compressed and unpacked size, what each holds) and its
// total compressed size, for `make image` to print.
func Summary(idx v1.ImageIndex) (string, error) {
	var b strings.Builder
	for _, p := range Platforms {
		img, err := ImageFor(idx, p)
		if err != nil {
			return "", err
		}
		digest, err := img.Digest()
		if err != nil {
			return "", err
		}
		s, err := imageSummary(img)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s  %s\n%s", p, digest, s)
	}
	return b.String(), nil
}

func imageSummary(img v1.Image) (string, error) {
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return "", err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	total := int64(len(manifest) + len(config))
	for i, l := range layers {
		digest, err := l.Digest()
		if err != nil {
			return "", err
		}
		size, err := l.Size()
		if err != nil {
			return "", err
		}
		unpacked, err := uncompressedSize(l)
		if err != nil {
			return "", err
		}
		total += size
		by := ""
		if i < len(cf.History) {
			by = cf.History[i].CreatedBy
		}
		fmt.Fprintf(&b, "  layer %d  %s  %s compressed, %s unpacked  %s\n", i+1, digest.Hex[:12], mib(size), mib(unpacked), by)
	}
	fmt.Fprintf(&b, "  total    %s compressed (manifest, config and %d layers)\n", mib(total), len(layers))
	return b.String(), nil
}

func uncompressedSize(l v1.Layer) (int64, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	return io.Copy(io.Discard, rc)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
