package image

import (
	"debug/elf"
	"fmt"
	"path"
)

// SharedLibraries returns every shared object the dynamic loader maps when it
// starts binary on p, the loader itself first, each at the path the loader
// opens it by: the binary's PT_INTERP, then its DT_NEEDED names and theirs,
// breadth first, each found in p's library directories in the loader's order.
// It reads the ELF files only, never runs them, so it works for a binary of
// another architecture (ldd would have to start it). The image carries exactly
// these, so what the binary was linked against on this machine is what it
// finds in the image.
func SharedLibraries(binary string, p Platform) ([]string, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return nil, fmt.Errorf("reading %s as ELF: %w", binary, err)
	}
	defer f.Close()
	if f.Machine != p.machine() {
		return nil, fmt.Errorf("%s is an ELF for %s, want %s for %s", binary, f.Machine, p.machine(), p)
	}
	interp, err := interpreter(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", binary, err)
	}
	libs := []string{interp}
	// glibc's libc names the loader in DT_NEEDED; the loader answers that
	// name itself, mapping no second copy.
	seen := map[string]bool{path.Base(interp): true}
	if soname, err := sonameOf(interp); err == nil {
		seen[soname] = true
	}
	queue, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("reading the DT_NEEDED entries of %s: %w", binary, err)
	}
	for len(queue) > 0 {
		soname := queue[0]
		queue = queue[1:]
		if seen[soname] {
			continue
		}
		seen[soname] = true
		lib, needed, err := p.findLibrary(soname)
		if err != nil {
			return nil, err
		}
		libs = append(libs, lib)
		queue = append(queue, needed...)
	}
	return libs, nil
}

// interpreter is the loader a dynamically linked binary names (PT_INTERP).
func interpreter(f *elf.File) (string, error) {
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("reading PT_INTERP: %w", err)
		}
		for len(b) > 0 && b[len(b)-1] == 0 {
			b = b[:len(b)-1]
		}
		return string(b), nil
	}
	return "", fmt.Errorf("the binary is not dynamically linked (no PT_INTERP): build llmd-router with cgo (CGO_ENABLED=1), as it links libzmq")
}

// sonameOf is a library's DT_SONAME (empty when it has none).
func sonameOf(lib string) (string, error) {
	f, err := elf.Open(lib)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", lib, err)
	}
	defer f.Close()
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(names) == 0 {
		return "", err
	}
	return names[0], nil
}

// findLibrary is the first file named soname for p's machine in the
// directories Debian's loader searches without an ld.so.cache (the image has
// none): the multiarch directories, then /lib and /usr/lib. As the loader
// does, it passes over a file of another machine. It returns the names that
// library needs in turn.
func (p Platform) findLibrary(soname string) (string, []string, error) {
	for _, dir := range p.libraryDirs() {
		cand := path.Join(dir, soname)
		f, err := elf.Open(cand)
		if err != nil {
			continue
		}
		machine := f.Machine
		needed, err := f.ImportedLibraries()
		f.Close()
		if machine != p.machine() {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("reading the DT_NEEDED entries of %s: %w", cand, err)
		}
		return cand, needed, nil
	}
	return "", nil, fmt.Errorf("library %s for %s not found in %v: install its Debian package for %s (make deps installs libzmq3-dev:%s)",
		soname, p, p.libraryDirs(), p.DebianArch, p.DebianArch)
}
