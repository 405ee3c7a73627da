package image

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push uploads the image index (and every platform's image) to the registry
// under tag (repository:version), with the credentials of the Docker config
// (docker login, credential helpers), and checks that the registry now
// serves exactly the index's digest under the tag. The manifests' bytes are
// pushed as built, so the pinned digest stays valid; a `docker load` +
// `docker push` of a tarball would re-encode one platform's image and
// change the digest.
func Push(ctx context.Context, tag string, idx v1.ImageIndex, opts ...name.Option) (v1.Hash, error) {
	ref, err := name.NewTag(tag, append([]name.Option{name.StrictValidation}, opts...)...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image tag %q: %w", tag, err)
	}
	want, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	ro := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if err := remote.WriteIndex(ref, idx, ro...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	got, err := remote.Head(ref, ro...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("reading back %s: %w", ref, err)
	}
	if got.Digest != want {
		return v1.Hash{}, fmt.Errorf("registry serves %s as %s, pushed %s", ref, got.Digest, want)
	}
	return want, nil
}
