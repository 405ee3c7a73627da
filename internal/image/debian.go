package image

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// debianPackage is the Debian package a file shipped in the image comes from.
// Name is as dpkg spells it unambiguously: with the architecture
// ("libzmq5:arm64") for a package installed for several (multiarch).
type debianPackage struct {
	Name, Version string
}

// copyrightPath is where Debian keeps a package's licence terms, which the
// image ships beside the libraries it takes from the package (one file for
// every architecture of a multiarch package).
func (p debianPackage) copyrightPath() string {
	name, _, _ := strings.Cut(p.Name, ":")
	return filepath.Join("/usr/share/doc", name, "copyright")
}

// debianPackages maps each file to the package that installed it, asking
// dpkg. Debian 12 merged /lib into /usr/lib, and dpkg knows each file under
// one of the two spellings, so both are tried.
func debianPackages(ctx context.Context, files []string) (map[string]debianPackage, error) {
	owner := map[string]string{}
	for _, f := range files {
		var errs []string
		for _, p := range usrMergeSpellings(f) {
			out, err := exec.CommandContext(ctx, "dpkg-query", "-S", p).CombinedOutput()
			if err != nil {
				errs = append(errs, strings.TrimSpace(string(out)))
				continue
			}
			// "libzmq5:arm64: /usr/lib/..." or "libc-bin: /sbin/ldconfig".
			name, _, _ := strings.Cut(string(out), ": ")
			owner[f] = strings.TrimSpace(strings.Split(name, ",")[0])
			break
		}
		if owner[f] == "" {
			return nil, fmt.Errorf("finding the Debian package of %s (the image takes its libraries and their licences from Debian packages; build it on Debian 12): %s", f, strings.Join(errs, "; "))
		}
	}
	names := make([]string, 0, len(owner))
	for _, n := range owner {
		names = append(names, n)
	}
	versions, err := packageVersions(ctx, names)
	if err != nil {
		return nil, err
	}
	pkgs := map[string]debianPackage{}
	for f, n := range owner {
		pkgs[f] = debianPackage{Name: n, Version: versions[n]}
	}
	return pkgs, nil
}

// packageVersions asks dpkg for the installed version of each package, keyed
// by the name as given (with its architecture, if it has one).
func packageVersions(ctx context.Context, names []string) (map[string]string, error) {
	sort.Strings(names)
	names = slices.Compact(names)
	out, err := exec.CommandContext(ctx, "dpkg-query", append([]string{"-W", "-f", "${binary:Package} ${Version}\\n"}, names...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("dpkg-query -W %s (build the image on Debian 12): %w", strings.Join(names, " "), err)
	}
	versions := map[string]string{}
	for _, line := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		if n, v, ok := strings.Cut(line, " "); ok {
			versions[n] = v
		}
	}
	return versions, nil
}

// usrMergeSpellings is path as given, resolved through symlinks, and each with
// /usr added or removed, without repeats.
func usrMergeSpellings(path string) []string {
	var out []string
	add := func(p string) {
		for _, q := range out {
			if q == p {
				return
			}
		}
		out = append(out, p)
	}
	cands := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		cands = append(cands, real)
	}
	for _, c := range cands {
		add(c)
		if rest, ok := strings.CutPrefix(c, "/usr/"); ok {
			add("/" + rest)
		} else {
			add("/usr" + c)
		}
	}
	return out
}
