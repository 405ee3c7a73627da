package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// buildinfoPkg holds the variables the linker stamps (version, commit).
const buildinfoPkg = "github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo"

// BuildRouter compiles llmd-router for p from the module at moduleDir into
// out, as the image carries it: cgo on (libzmq, through p's C compiler and
// p's libzmq3-dev, so linux/arm64 is a cross build on an amd64 machine),
// -trimpath so the checkout's path is not in the binary (one commit, one
// digest wherever it is built), symbols stripped, the version and commit
// stamped (not left to Go's VCS stamping, which -buildvcs=false turns off).
// It reuses the Go build cache, so a rebuild after a small change costs a
// link.
func BuildRouter(ctx context.Context, moduleDir, out, version, commit string, p Platform) error {
	if err := p.validate(); err != nil {
		return err
	}
	ldflags := fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", buildinfoPkg, version, buildinfoPkg, commit)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./router/cmd/llmd-router")
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), p.buildEnv()...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building llmd-router for %s in %s (needs %s-gcc and libzmq3-dev:%s; make deps installs them): %w\n%s",
			p, moduleDir, p.Triplet, p.DebianArch, err, b)
	}
	return nil
}

// Commit is what the image records of the checkout it is built from.
type Commit struct {
	// Revision is the commit hash.
	Revision string
	// Version is the release: `git describe --tags --always --dirty` (as
	// the GNUmakefile's VERSION) unless FromCheckout was given one.
	Version string
	// Time is the commit time, or SOURCE_DATE_EPOCH when set (the
	// reproducible-builds convention for a fixed build time).
	Time time.Time
}

// HeadCommit reads the commit the checkout at dir is on.
func HeadCommit(ctx context.Context, dir string) (Commit, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		b, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s in %s: %w", strings.Join(args, " "), dir, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	var c Commit
	var err error
	if c.Revision, err = git("rev-parse", "HEAD"); err != nil {
		return c, err
	}
	if c.Version, err = git("describe", "--tags", "--always", "--dirty"); err != nil {
		return c, err
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git("log", "-1", "--format=%ct", "HEAD"); err != nil {
			return c, err
		}
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return c, fmt.Errorf("commit time %q (SOURCE_DATE_EPOCH or git log): %w", epoch, err)
	}
	c.Time = time.Unix(secs, 0).UTC()
	return c, nil
}

// FromCheckout builds the image index of the checkout at moduleDir, as
// `make image` does: for each of Platforms, the router compiled with
// BuildRouter (in a temporary directory, removed after) and its image, all
// labelled with the head commit and stamped with its time. An empty version
// means the commit's `git describe`.
func FromCheckout(ctx context.Context, moduleDir, version string) (v1.ImageIndex, Commit, error) {
	commit, err := HeadCommit(ctx, moduleDir)
	if err != nil {
		return nil, commit, err
	}
	if version == "" {
		version = commit.Version
	}
	commit.Version = version
	work, err := os.MkdirTemp("", "llmd-router-image-")
	if err != nil {
		return nil, commit, err
	}
	defer os.RemoveAll(work)
	images := make([]v1.Image, len(Platforms))
	for i, p := range Platforms {
		bin := filepath.Join(work, "llmd-router-"+p.GOARCH)
		if err := BuildRouter(ctx, moduleDir, bin, version, commit.Revision, p); err != nil {
			return nil, commit, err
		}
		spec := Spec{Binary: bin, Version: version, Revision: commit.Revision, Created: commit.Time, Platform: p}
		if images[i], err = Build(ctx, spec); err != nil {
			return nil, commit, fmt.Errorf("the %s image: %w", p, err)
		}
	}
	idx, err := Index(images)
	return idx, commit, err
}
