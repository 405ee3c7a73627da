package image

import (
	"debug/elf"
	"fmt"
	"path"
	"runtime"
)

// Platform is one architecture the image is built for: how Go, Debian and
// the GNU toolchain name it. The router links libzmq through cgo, so each
// platform needs a C compiler for it and Debian's libzmq3-dev for it
// (multiarch: `dpkg --add-architecture arm64`); `make deps` installs both.
type Platform struct {
	// GOARCH is Go's name (the image config's architecture, the OCI platform).
	GOARCH string
	// DebianArch is dpkg's name, the qualifier of the multiarch packages.
	DebianArch string
	// Triplet is the GNU triplet: the C compiler's prefix and the multiarch
	// library directory.
	Triplet string
}

var (
	// AMD64 is linux/amd64.
	AMD64 = Platform{GOARCH: "amd64", DebianArch: "amd64", Triplet: "x86_64-linux-gnu"}
	// ARM64 is linux/arm64 (AWS Graviton system nodes).
	ARM64 = Platform{GOARCH: "arm64", DebianArch: "arm64", Triplet: "aarch64-linux-gnu"}
	// Platforms are what the image index holds, in its order.
	Platforms = []Platform{AMD64, ARM64}
)

// String is the OCI platform, "linux/arm64".
func (p Platform) String() string { return "linux/" + p.GOARCH }

// machine is the ELF machine of binaries for p.
func (p Platform) machine() elf.Machine {
	switch p.GOARCH {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	}
	return elf.EM_NONE
}

// libraryDirs are where Debian's loader looks for a library when there is no
// ld.so.cache, in its order: its multiarch directories, then /lib and /usr/lib.
func (p Platform) libraryDirs() []string {
	return []string{path.Join("/lib", p.Triplet), path.Join("/usr/lib", p.Triplet), "/lib", "/usr/lib"}
}

// buildEnv is the environment a cgo build for p adds: the triplet's C
// compiler, and pkg-config reading p's .pc files only (pebbe/zmq4 asks
// pkg-config for libzmq), so a cross build never links this machine's own.
func (p Platform) buildEnv() []string {
	return []string{"CGO_ENABLED=1", "GOOS=linux", "GOARCH=" + p.GOARCH, "CC=" + p.Triplet + "-gcc",
		"PKG_CONFIG_LIBDIR=" + path.Join("/usr/lib", p.Triplet, "pkgconfig") + ":/usr/share/pkgconfig"}
}

// validate rejects a platform the image does not know.
func (p Platform) validate() error {
	if p.machine() == elf.EM_NONE || p.Triplet == "" || p.DebianArch == "" {
		return fmt.Errorf("platform %+v is not one the router image is built for (%v)", p, Platforms)
	}
	return nil
}

// NativePlatform is the platform of this machine, whose image it can run
// without emulation.
func NativePlatform() (Platform, error) {
	for _, p := range Platforms {
		if p.GOARCH == runtime.GOARCH {
			return p, nil
		}
	}
	return Platform{}, fmt.Errorf("this machine's architecture %s is not one the router image is built for (%v)", runtime.GOARCH, Platforms)
}
