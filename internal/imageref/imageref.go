// Package imageref reads container image references as a container runtime
// does and rewrites them through registry mirrors, such as an Amazon ECR
// pull-through cache.
//
// References are normalised with go-containerregistry's name package before
// anything else, so the forms a runtime treats as one image are one image
// here: `vllm/vllm-openai:v0.30.0`, `docker.io/vllm/vllm-openai:v0.30.0` and
// `index.docker.io/vllm/vllm-openai:v0.30.0` all come from Docker Hub, and
// `busybox` is `docker.io/library/busybox:latest`.
package imageref

import (
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Ref is a parsed image reference: the registry host, the repository within
// it (Docker Hub's official images under `library/`), and a tag, a digest or
// both.
type Ref struct {
	Registry, Repository, Tag, Digest string
}

// Parse reads an image reference as a container runtime does: a missing
// registry is Docker Hub, a missing tag (without a digest) is `latest`.
// `repo@sha256:...` and `repo:tag@sha256:...` keep their digest, which is
// what the runtime pulls; the tag of the second form is kept as written.
func Parse(ref string) (Ref, error) {
	if ref == "" || strings.TrimSpace(ref) != ref {
		return Ref{}, fmt.Errorf("%q is not an image reference: want [registry/]repository[:tag][@sha256:<64 hex>]", ref)
	}
	base, _, hasDigest := strings.Cut(ref, "@")
	var out Ref
	if hasDigest {
		d, err := name.NewDigest(ref, name.WeakValidation)
		if err != nil {
			return Ref{}, fmt.Errorf("%q is not an image reference: %v", ref, err)
		}
		out.Digest = d.DigestStr()
	}
	// The name package would default a missing tag to latest; a reference
	// pinned by digest alone has no tag.
	t, err := name.NewTag(base, name.WeakValidation)
	if err != nil {
		return Ref{}, fmt.Errorf("%q is not an image reference: %v", ref, err)
	}
	out.Registry, out.Repository = t.RegistryStr(), t.RepositoryStr()
	if !hasDigest || strings.Contains(base[strings.LastIndex(base, "/")+1:], ":") {
		out.Tag = t.TagStr()
	}
	return out, nil
}

// String is the reference in full: registry, repository, then the tag and
// the digest it has.
func (r Ref) String() string {
	s := r.Registry + "/" + r.Repository
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// Mirrors maps upstream registry hosts to the repository prefixes that serve
// their images (a pull-through cache: `123456789012.dkr.ecr.us-east-1.amazonaws.com/docker-hub`
// serves docker.io's `vllm/vllm-openai` as `.../docker-hub/vllm/vllm-openai`).
// Keys are normalised as the name package normalises a registry, so
// `docker.io` and `index.docker.io` are one key.
type Mirrors map[string]string

// NewMirrors checks and normalises a mirror map as written in a
// configuration; field names the attribute in errors.
func NewMirrors(raw map[string]string, field string) (Mirrors, error) {
	m := make(Mirrors, len(raw))
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	seen := map[string]string{}
	for _, k := range keys {
		host, err := registryHost(k)
		if err != nil {
			return nil, fmt.Errorf("%s: key %q: %v; give an upstream registry host such as docker.io, ghcr.io, nvcr.io or public.ecr.aws (no scheme, no path)", field, k, err)
		}
		if other, dup := seen[host]; dup {
			return nil, fmt.Errorf("%s: keys %q and %q name the same registry (%s); keep one", field, other, k, host)
		}
		seen[host] = k
		prefix, err := mirrorPrefix(raw[k])
		if err != nil {
			return nil, fmt.Errorf("%s[%q]: %v; give a registry host and an optional path, e.g. 123456789012.dkr.ecr.us-east-1.amazonaws.com/docker-hub (an ECR pull-through cache rule's prefix)", field, k, err)
		}
		m[host] = prefix
	}
	return m, nil
}

// registryHost is an upstream registry's normalised host.
func registryHost(s string) (string, error) {
	if s == "" || strings.ContainsAny(s, "/@ ") {
		return "", fmt.Errorf("not a registry host")
	}
	r, err := name.NewRegistry(s, name.StrictValidation)
	if err != nil {
		return "", err
	}
	return r.RegistryStr(), nil
}

// mirrorPrefix checks a mirror's `host[/path]`: a repository beneath it must
// itself be a valid reference.
func mirrorPrefix(s string) (string, error) {
	if strings.Contains(s, "://") {
		return "", fmt.Errorf("%q has a scheme: image references have none", s)
	}
	s = strings.TrimSuffix(s, "/")
	host, _, _ := strings.Cut(s, "/")
	if !strings.ContainsAny(host, ".:") && host != "localhost" {
		return "", fmt.Errorf("%q does not start with a registry host (a name with a dot or a port)", s)
	}
	if strings.ContainsAny(s, "@ ") || strings.Contains(s[len(host):], ":") {
		return "", fmt.Errorf("%q is not a registry host and path (no tag, digest or spaces)", s)
	}
	if _, err := name.NewRepository(s+"/x", name.WeakValidation); err != nil {
		return "", fmt.Errorf("%q: %v", s, err)
	}
	return s, nil
}

// Rewrite is ref as a runtime pulls it through the mirrors: the registry of
// the normalised reference replaced by its mirror's prefix, the repository,
// tag and digest kept. A reference of a registry without a mirror is
// returned as written.
func (m Mirrors) Rewrite(ref string) (string, error) {
	r, err := Parse(ref)
	if err != nil {
		return "", err
	}
	prefix, ok := m[r.Registry]
	if !ok {
		return ref, nil
	}
	r.Registry = prefix
	out := r.String()
	if _, err := name.ParseReference(out, name.WeakValidation); err != nil {
		return "", fmt.Errorf("%s through mirror %s is %q, not an image reference: %v", ref, prefix, out, err)
	}
	return out, nil
}
