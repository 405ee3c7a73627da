// Package buildinfo holds what a release build stamps into both programs: the
// version and commit, and in the provider the router image it deploys by
// default, pinned by digest. It is cgo-free and imports only the standard
// library, so the provider can use it.
//
// A release sets them with the linker (see the GNUmakefile and .goreleaser.yml):
//
//	-X github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo.Version=0.1.0
//	-X github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo.Commit=<commit hash>
//	-X github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo.RouterImage=ghcr.io/llmd-dev/llmd-router:0.1.0@sha256:...
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// ImageRepository is where releases publish the router image.
const ImageRepository = "ghcr.io/llmd-dev/llmd-router"

// Version is the release version, "dev" in a build that was not stamped.
var Version = "dev"

// Commit is the commit the release was built from, stamped with Version;
// unstamped, Revision falls back to what Go's build recorded.
var Commit = ""

// RouterImage is the router image the provider deploys when a
// llmd_prefix_router sets no image: repository:version@sha256:digest, stamped
// at release after the image is built. Empty in a development build, which
// pins nothing.
var RouterImage = ""

// Pinned reports whether this build pins a router image.
func Pinned() bool { return RouterImage != "" }

// Revision is the commit the binary was built from: Commit, else what Go's
// build recorded (with "-dirty" for uncommitted changes; absent with
// -buildvcs=false), else "unknown".
func Revision() string {
	if Commit != "" {
		return Commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown", ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	return rev + dirty
}

// Program is one line naming a program's build: name, version, commit and Go
// release, as `llmd-router version` prints it.
func Program(name string) string {
	return fmt.Sprintf("%s %s (commit %s, %s)", name, Version, Revision(), runtime.Version())
}

// Provider is what `terraform-provider-llmd -version` prints: its build and
// the router image it pins, or that a development build pins none.
func Provider() string {
	if !Pinned() {
		return Program("terraform-provider-llmd") + "\nrouter image: none pinned (development build); set llmd_prefix_router.image"
	}
	return Program("terraform-provider-llmd") + "\nrouter image: " + RouterImage
}
