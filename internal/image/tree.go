package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// tree is the content of one layer: directories and regular files with their
// owners and modes. It writes the same bytes for the same content: entries in
// name order, one fixed timestamp, numeric owners without names, no host
// metadata (PAX records, device numbers, access times).
type tree struct {
	entries map[string]*tar.Header
	bodies  map[string][]byte
}

func newTree() *tree {
	return &tree{entries: map[string]*tar.Header{}, bodies: map[string][]byte{}}
}

// dir adds a directory (and its missing parents, root-owned 0755).
func (t *tree) dir(name string, mode int64, uid int) {
	name = clean(name)
	if name == "" {
		return
	}
	t.parents(name)
	t.entries[name] = &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid}
}

// file adds a root-owned regular file (and its missing parent directories).
func (t *tree) file(name string, mode int64, body []byte) {
	name = clean(name)
	t.parents(name)
	t.entries[name] = &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body))}
	t.bodies[name] = body
}

func (t *tree) parents(name string) {
	for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
		if _, ok := t.entries[d]; !ok {
			t.entries[d] = &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}
		}
	}
}

// clean turns "/etc/passwd" into the tar name "etc/passwd".
func clean(name string) string {
	return strings.TrimPrefix(path.Clean("/"+name), "/")
}

// tar writes the tree as one uncompressed tar stream, every entry stamped mtime.
func (t *tree) tar(mtime time.Time) ([]byte, error) {
	names := make([]string, 0, len(t.entries))
	for n := range t.entries {
		names = append(names, n)
	}
	// Name order puts every directory before what it holds.
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		h := *t.entries[n]
		h.ModTime = mtime.UTC()
		h.Format = tar.FormatUSTAR
		if len(h.Name) > 100 {
			h.Format = tar.FormatPAX // USTAR cannot hold a long name; PAX records hold only the path then
		}
		if err := tw.WriteHeader(&h); err != nil {
			return nil, fmt.Errorf("writing tar header %s: %w", h.Name, err)
		}
		if body := t.bodies[n]; body != nil {
			if _, err := tw.Write(body); err != nil {
				return nil, fmt.Errorf("writing %s: %w", h.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// layer is the tree as an OCI gzip layer. Go's gzip at a fixed level writes
// the same bytes for the same input, so the layer digest is stable too.
func (t *tree) layer(mtime time.Time) (v1.Layer, error) {
	b, err := t.tar(mtime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression))
}
