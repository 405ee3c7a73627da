package testenv

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo"
	"github.com/llmd-dev/terraform-provider-llmd/internal/image"
)

// Image is the router image as `make image` builds it, unpacked for tests.
type Image struct {
	// Layout is the OCI image layout the image index was written to.
	Layout string
	// Index is the image index's digest (every platform); Layout holds it
	// under it.
	Index v1.Hash
	// Digest is the manifest digest of this machine's platform's image,
	// the one Rootfs unpacks.
	Digest v1.Hash
	// Tarballs are each platform's image as `docker load` reads it, keyed
	// by GOARCH.
	Tarballs map[string]string
	// Reference is repository:version@sha256:<index digest>, as a release
	// pins it.
	Reference string
	// Config is the image's runtime config: entrypoint, user, env, labels.
	Config v1.Config
	// Rootfs is the image's layers unpacked, lower to upper, into one root
	// filesystem. Treat it as read-only: Start gives each container its own
	// root built from it.
	Rootfs string
}

var (
	routerImageOnce sync.Once
	routerImage     *Image
	routerImageErr  error
)

// RouterImageRootfs builds the router image index from this checkout once
// per test binary, exactly as `make image` does (internal/image: every
// platform, the same compile flags, layers and config), writes it as an OCI
// layout, reads it back from there by digest and unpacks this machine's
// platform's image. The compiles reuse the Go build cache.
func RouterImageRootfs(t testing.TB) *Image {
	t.Helper()
	routerImageOnce.Do(func() {
		routerImage, routerImageErr = buildRouterImage()
	})
	if routerImageErr != nil {
		unavailable(t, "the router image", routerImageErr, "install libzmq3-dev, ca-certificates and a C compiler (make deps) on Debian 12")
	}
	return routerImage
}

func buildRouterImage() (*Image, error) {
	ctx := context.Background()
	work, err := os.MkdirTemp("", "llmd-testenv-image-")
	if err != nil {
		return nil, err
	}
	onStop(func(bool) { os.RemoveAll(work) })
	built, commit, err := image.FromCheckout(ctx, filepath.Join(sourceDir(), "..", ".."), "")
	if err != nil {
		return nil, err
	}
	out, err := image.Write(filepath.Join(work, "image"), built, buildinfo.ImageRepository, commit.Version)
	if err != nil {
		return nil, err
	}
	native, err := image.NativePlatform()
	if err != nil {
		return nil, err
	}
	// What the tests run is what was written, not the in-memory image.
	written := &Image{Layout: out.Layout, Index: out.Digest, Tarballs: out.Tarballs, Reference: out.Reference}
	img, err := written.forPlatform(native, work)
	if err != nil {
		return nil, fmt.Errorf("the %s router image: %w", native, err)
	}
	return img, nil
}

// ForPlatform is the image for p from the same index (written to Layout),
// unpacked into its own root filesystem: for inspecting, or running under
// emulation (Container.Emulator), the image of another architecture.
func (img *Image) ForPlatform(t testing.TB, p image.Platform) *Image {
	t.Helper()
	other, err := img.forPlatform(p, t.TempDir())
	if err != nil {
		t.Fatalf("the %s router image: %v", p, err)
	}
	return other
}

func (img *Image) forPlatform(p image.Platform, dir string) (*Image, error) {
	idx, err := image.FromLayout(img.Layout, img.Index)
	if err != nil {
		return nil, err
	}
	pi, err := image.ImageFor(idx, p)
	if err != nil {
		return nil, err
	}
	digest, err := pi.Digest()
	if err != nil {
		return nil, err
	}
	cf, err := pi.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the image config: %w", err)
	}
	rootfs := filepath.Join(dir, "rootfs")
	if err := unpack(pi, rootfs); err != nil {
		return nil, fmt.Errorf("unpacking: %w", err)
	}
	other := *img
	other.Digest, other.Config, other.Rootfs = digest, cf.Config, rootfs
	return &other, nil
}

// QemuUserStatic is the path of Debian's statically linked qemu user-mode
// emulator for p (qemu-user-static, which `make deps` installs), for
// Container.Emulator.
func QemuUserStatic(t testing.TB, p image.Platform) string {
	t.Helper()
	cpu, _, _ := strings.Cut(p.Triplet, "-")
	path, err := exec.LookPath("qemu-" + cpu + "-static")
	if err != nil {
		unavailable(t, "qemu user-mode emulation for "+p.String(), err, "apt-get install qemu-user-static (make deps installs it)")
	}
	return path
}

// unpack writes the image's flattened layers into dir with their owners and
// modes, as a container runtime does.
func unpack(img v1.Image, dir string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("layer entry %q leaves the root", h.Name)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		mode := h.FileInfo().Mode()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("writing %s: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
			continue // a symlink's owner and mode are not the target's
		default:
			return fmt.Errorf("layer entry %q has type %q, which the router image does not use", h.Name, h.Typeflag)
		}
		if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
			return err
		}
		if err := os.Chmod(target, mode.Perm()|mode&(fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid)); err != nil {
			return err
		}
	}
}

// Container is what a pod's container spec gives the image's process.
type Container struct {
	// Command replaces the image's entrypoint (a container's command); empty
	// keeps it.
	Command []string
	// Args follow the entrypoint (a container's args). As Kubernetes does,
	// $(NAME) is replaced by the value of NAME in the container's env.
	Args []string
	// Env is NAME=value pairs on top of the image's env (a container's env).
	Env []string
	// PodIP is the pod's IP, in the pod network (see ServePodIPs). The
	// process shares this machine's network, so it must listen on this IP,
	// not on all addresses: the container's env gets POD_IP, as a
	// downward-API variable would, for Args to use as "$(POD_IP)".
	PodIP string
	// Files are placed in the container's root, root-owned and world
	// readable (what a pod mounts read-only: config maps, secrets, the
	// service account). For in-cluster config against the test's API
	// server, give token, ca.crt and namespace under
	// /var/run/secrets/kubernetes.io/serviceaccount/ and set
	// KUBERNETES_SERVICE_HOST=127.0.0.1 and KUBERNETES_SERVICE_PORT in Env:
	// the container shares this machine's loopback.
	Files map[string][]byte
	// Emulator, when set, is a statically linked qemu user-mode emulator
	// (qemu-user-static) placed in the container's root at /.emulator and
	// run as its PID 1 with the program as its argument: how a node runs an
	// image of another architecture through binfmt_misc, without changing
	// this machine's binfmt registrations. The program still sees only the
	// image's files.
	Emulator string
	// EmptyDirs are directories made empty in the container's root and
	// writable by its user, as emptyDir volumes mounted there are.
	EmptyDirs []string
	// Log, when set, also receives the process's output (stdout and
	// stderr), e.g. a Cluster.PodLog that the API server serves.
	Log io.Writer
}

// emulatorPath is where Start places Container.Emulator in the root.
const emulatorPath = "/.emulator"

// ContainerProcess is the image's process started by Image.Start.
type ContainerProcess struct {
	proc *process
	// Root is this container's root filesystem.
	Root string
}

var containerSeq struct {
	sync.Mutex
	n int
}

// Start runs the image's entrypoint (or c.Command) as a container would: in
// its own root filesystem (the image's files, hard-linked, plus c.Files),
// with a fresh /proc in its own PID and mount namespaces (it is PID 1), as
// the image's user, in its working directory, with only the image's env and
// c.Env. It needs root. The process stops (SIGTERM, then SIGKILL) at the end
// of the test; its output is in Logs.
func (img *Image) Start(t testing.TB, c Container) *ContainerProcess {
	t.Helper()
	p, err := img.start(t, c)
	if err != nil {
		t.Fatalf("starting a container of %s: %v", img.Reference, err)
	}
	t.Cleanup(p.proc.stop)
	return p
}

func (img *Image) start(t testing.TB, c Container) (*ContainerProcess, error) {
	env := append([]string{}, img.Config.Env...)
	if c.PodIP != "" {
		ip := net.ParseIP(c.PodIP)
		_, podNet, _ := net.ParseCIDR(podNetwork)
		if ip == nil || !podNet.Contains(ip) {
			return nil, fmt.Errorf("pod IP %q is not in the pod network %s", c.PodIP, podNetwork)
		}
		ServePodIPs(t)
		env = append(env, "POD_IP="+c.PodIP)
	}
	env = append(env, c.Env...)
	argv := img.Config.Entrypoint
	if len(c.Command) > 0 {
		argv = c.Command
	}
	argv = append(append([]string{}, argv...), expandArgs(c.Args, env)...)
	if len(argv) == 0 {
		return nil, fmt.Errorf("the image has no entrypoint and the container no command")
	}
	uid, gid, err := imageUser(img.Config.User)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(t.TempDir(), "root")
	if err := linkTree(img.Rootfs, root); err != nil {
		return nil, fmt.Errorf("making the container's root: %w", err)
	}
	// The mount point a runtime creates for the container's /proc.
	if err := os.Mkdir(filepath.Join(root, "proc"), 0o555); err != nil {
		return nil, err
	}
	for name, body := range c.Files {
		path := filepath.Join(root, filepath.FromSlash(filepath.Clean("/"+name)))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, body, 0o644); err != nil {
			return nil, err
		}
	}
	for _, dir := range c.EmptyDirs {
		path := filepath.Join(root, filepath.FromSlash(filepath.Clean("/"+dir)))
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, err
		}
		// A fresh emptyDir replaces whatever the image holds there.
		if err := os.Chmod(path, 0o1777); err != nil {
			return nil, err
		}
	}
	if c.Emulator != "" {
		body, err := os.ReadFile(c.Emulator)
		if err != nil {
			return nil, fmt.Errorf("reading the emulator: %w", err)
		}
		if err := os.WriteFile(filepath.Join(root, emulatorPath), body, 0o755); err != nil {
			return nil, err
		}
		argv = append([]string{emulatorPath}, argv...)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, fmt.Errorf("unshare (util-linux) not on PATH: %w", err)
	}
	wd := img.Config.WorkingDir
	if wd == "" {
		wd = "/"
	}
	// env -i: the container sees only its own env, never the test's.
	args := append([]string{"-i"}, env...)
	args = append(args, unshare, "--mount", "--pid", "--fork", "--kill-child", "--mount-proc",
		"--root="+root, "--wd="+wd, "--setgid="+strconv.Itoa(gid), "--setuid="+strconv.Itoa(uid), "--")
	args = append(args, argv...)
	containerSeq.Lock()
	containerSeq.n++
	name := fmt.Sprintf("container-%d-%s", containerSeq.n, filepath.Base(argv[0]))
	containerSeq.Unlock()
	proc, err := startProcessTee(name, "env", args, nil, c.Log)
	if err != nil {
		return nil, err
	}
	return &ContainerProcess{proc: proc, Root: root}, nil
}

// Wait waits up to timeout for the process to exit and returns how it ended
// (nil for status 0).
func (p *ContainerProcess) Wait(timeout time.Duration) error {
	select {
	case <-p.proc.done:
		return p.proc.waitErr
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %s; log:\n%s", p.proc.name, timeout, p.Logs())
	}
}

// Exited reports whether the process has ended, and how.
func (p *ContainerProcess) Exited() (bool, error) { return p.proc.exited() }

// Logs is everything the process wrote to stdout and stderr so far.
func (p *ContainerProcess) Logs() string { return p.proc.logTail(1 << 30) }

// PID is the container's PID 1 as this machine sees it (the process
// unshare forked), for reading its /proc entry; 0 once it is gone.
func (p *ContainerProcess) PID() int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.proc.cmd.Process.Pid, p.proc.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// Stop ends the process (SIGTERM, then SIGKILL after 5 s).
func (p *ContainerProcess) Stop() { p.proc.stop() }

// expandArgs replaces $(NAME) in args by NAME's value in env, leaves unknown
// references as written and turns $$ into $, as Kubernetes expands a
// container's args.
func expandArgs(args, env []string) []string {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	out := make([]string, len(args))
	for i, a := range args {
		var b strings.Builder
		for j := 0; j < len(a); j++ {
			if a[j] != '$' || j+1 == len(a) {
				b.WriteByte(a[j])
				continue
			}
			switch a[j+1] {
			case '$':
				b.WriteByte('$')
				j++
				continue
			case '(':
				if end := strings.IndexByte(a[j:], ')'); end > 0 {
					if v, ok := vars[a[j+2:j+end]]; ok {
						b.WriteString(v)
						j += end
						continue
					}
				}
			}
			b.WriteByte('$')
		}
		out[i] = b.String()
	}
	return out
}

// imageUser reads the config's numeric "uid:gid" (the router image names
// no user by name, so no passwd lookup is needed).
func imageUser(user string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(user, ":")
	if !ok {
		g = u
	}
	if uid, err = strconv.Atoi(u); err == nil {
		gid, err = strconv.Atoi(g)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("image user %q is not numeric uid:gid: %w", user, err)
	}
	return uid, gid, nil
}

// linkTree recreates src's directories under dst (same owners and modes, so
// each container has its own writable /tmp and home) and hard-links its
// files, which are root-owned and so read-only to the container's user.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
			st := fi.Sys().(*syscall.Stat_t)
			if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
			return os.Chmod(target, fi.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid))
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		default:
			return os.Link(path, target)
		}
	})
}
