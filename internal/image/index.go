package image

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index is the OCI image index of images (one per platform, as Build made
// them), each listed with the platform its config names, in the given order:
// a node pulls the one for its own architecture. Its bytes depend only on
// the images', so the same images give the same index digest.
func Index(images []v1.Image) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for _, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("reading an image config for the index: %w", err)
		}
		pl := v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
		if seen[pl.String()] {
			return nil, fmt.Errorf("two images for %s in one index", pl.String())
		}
		seen[pl.String()] = true
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &pl}})
	}
	return idx, nil
}

// ImageFor is the image idx lists for p.
func ImageFor(idx v1.ImageIndex, p Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading the image index: %w", err)
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == p.GOARCH {
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("the %s image %s: %w", p, d.Digest, err)
			}
			return img, nil
		}
	}
	return nil, fmt.Errorf("the image index lists no image for %s", p)
}
