package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KubernetesVersion is the control plane the tests run against.
const KubernetesVersion = "v1.32.13"

// kwokVersion is the kwok release whose binary and stage manifests the tests use.
const kwokVersion = "v0.8.0"

// kubebinPath returns the multi-call control-plane binary, building it from the
// kubebin module on first use. The cache key covers the module's files, so a
// change to them rebuilds. A cold build takes about 7 minutes on 2 cores.
func kubebinPath() (string, error) {
	src := filepath.Join(sourceDir(), "kubebin")
	key, err := filesKey(src, "go.mod", "go.sum", "main.go")
	if err != nil {
		return "", err
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "kubebin-"+KubernetesVersion+"-"+key)
	bin := filepath.Join(dir, "kubebin")
	err = withFileLock(dir+".lock", func() error {
		if _, err := os.Stat(bin); err == nil {
			return nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		major, minor, _ := strings.Cut(strings.TrimPrefix(KubernetesVersion, "v"), ".")
		minor, _, _ = strings.Cut(minor, ".")
		var ldflags []string
		for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
			ldflags = append(ldflags, "-X", pkg+".gitVersion="+KubernetesVersion, "-X", pkg+".gitMajor="+major, "-X", pkg+".gitMinor="+minor)
		}
		cmd := exec.Command("go", partBuild("build", strings.Join(ldflags, " "), "-o", bin+".tmp", ".")...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building the control plane in %s: %w\n%s", src, err, out)
		}
		return os.Rename(bin+".tmp", bin)
	})
	return bin, err
}

// kwokPaths returns the kwok binary, its stage manifests and its Logs CRD
// (from the kwok module itself, so behaviour matches the binary),
// installing on first use.
func kwokPaths() (bin string, stages []string, logsCRD string, err error) {
	cache, err := CacheDir()
	if err != nil {
		return "", nil, "", err
	}
	dir := filepath.Join(cache, "kwok-"+kwokVersion)
	bin = filepath.Join(dir, "kwok")
	err = withFileLock(dir+".lock", func() error {
		if _, err := os.Stat(bin); err == nil {
			return nil
		}
		cmd := exec.Command("go", partBuild("install", "", "sigs.k8s.io/kwok/cmd/kwok@"+kwokVersion)...)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOWORK=off", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("installing kwok %s: %w\n%s", kwokVersion, err, out)
		}
		return nil
	})
	if err != nil {
		return "", nil, "", err
	}
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/kwok@"+kwokVersion).Output()
	if err != nil {
		return "", nil, "", fmt.Errorf("locating the kwok module source: %w", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", nil, "", fmt.Errorf("locating the kwok module source: no Dir in %s", out)
	}
	stageDir := filepath.Join(mod.Dir, "kustomize", "stage")
	// Nodes become Ready and keep a lease; pods become Ready with IPs, complete, and go on deletion.
	stages = []string{
		filepath.Join(stageDir, "node", "fast", "node-initialize.yaml"),
		filepath.Join(stageDir, "pod", "fast", "pod-ready.yaml"),
		filepath.Join(stageDir, "pod", "fast", "pod-complete.yaml"),
		filepath.Join(stageDir, "pod", "fast", "pod-delete.yaml"),
	}
	heartbeat, err := filepath.Glob(filepath.Join(stageDir, "node", "heartbeat-with-lease", "node-*.yaml"))
	if err != nil || len(heartbeat) == 0 {
		return "", nil, "", fmt.Errorf("no heartbeat-with-lease stages under %s", stageDir)
	}
	stages = append(stages, heartbeat...)
	stages = append(stages, filepath.Join(sourceDir(), "kwok", "pod-fail.yaml"), filepath.Join(sourceDir(), "kwok", "pod-played.yaml"),
		filepath.Join(sourceDir(), "kwok", "pod-probed.yaml"))
	for _, s := range stages {
		if _, err := os.Stat(s); err != nil {
			return "", nil, "", fmt.Errorf("kwok stage manifest: %w", err)
		}
	}
	return bin, stages, filepath.Join(mod.Dir, "kustomize", "crd", "bases", "kwok.x-k8s.io_logs.yaml"), nil
}

// FailingJobImage is an image whose Job pods the test ground fails with exit
// code 1 and FailingJobLastLine as the last line of their logs (a kwok stage
// of ours, internal/testenv/kwok/pod-fail.yaml, playing the kubelet).
const (
	FailingJobImage    = "registry.invalid/llmd-testenv/fail-with-logs:1"
	FailingJobLastLine = "huggingface_hub.errors.GatedRepoError: 401 Client Error: access to model is restricted"
)

// partBuild is the go command (build or install) for a binary of the test
// ground from another module, with ldflags beyond -s -w and the rest of the
// arguments. Nobody debugs these binaries: the compiler writes no DWARF
// (which the linker's -w would drop anyway; the CPU it saves is in
// BENCHMARKS.md), and -trimpath on every one lets them share the standard
// library's compiled packages.
func partBuild(verb, ldflags string, args ...string) []string {
	return append([]string{verb, "-trimpath", "-gcflags=all=-dwarf=false", "-ldflags=-s -w " + ldflags}, args...)
}

// filesKey is a short content hash of some files in dir, for cache keys.
func filesKey(dir string, names ...string) (string, error) {
	var all []byte
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return "", err
		}
		all = append(all, b...)
	}
	sum := sha256.Sum256(all)
	return hex.EncodeToString(sum[:6]), nil
}
