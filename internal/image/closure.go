package image

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// SharedLibraries returns every shared object the dynamic loader maps when it
// starts binary, the loader itself included, each at the path the loader opens
// it by: ldd's answer. The image carries exactly these, so what the binary was
// linked against on this machine is what it finds in the image.
func SharedLibraries(ctx context.Context, binary string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", binary).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w: %s", binary, err, bytes.TrimSpace(out))
	}
	libs, err := parseLDD(out)
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", binary, err)
	}
	return libs, nil
}

// parseLDD reads glibc ldd's output. Its lines are "soname => /path (addr)"
// for a library found by search, "/path (addr)" for the loader (named by path
// in the binary), and "soname (addr)" for the kernel's vDSO, which no file
// backs. A library ldd cannot find is an error: the image would not start.
func parseLDD(out []byte) ([]string, error) {
	var libs []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if strings.Contains(line, "statically linked") || strings.Contains(line, "not a dynamic executable") {
			return nil, fmt.Errorf("the binary is not dynamically linked (%q): build llmd-router with cgo (CGO_ENABLED=1), as it links libzmq", line)
		}
		path := line
		if _, after, ok := strings.Cut(line, "=>"); ok {
			path = strings.TrimSpace(after)
			if strings.HasPrefix(path, "not found") {
				return nil, fmt.Errorf("library %q not found: install it (apt-get install libzmq3-dev)", strings.TrimSpace(strings.SplitN(line, "=>", 2)[0]))
			}
		}
		if i := strings.Index(path, " ("); i >= 0 {
			path = path[:i]
		}
		if !filepath.IsAbs(path) {
			continue // the vDSO
		}
		if !seen[path] {
			seen[path] = true
			libs = append(libs, path)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(libs) == 0 {
		return nil, fmt.Errorf("no shared libraries in ldd's output %q", out)
	}
	return libs, nil
}
