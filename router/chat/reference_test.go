package chat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// refResult is one line of render_reference.py's output.
type refResult struct {
	Text          *string `json:"text"`
	Error         string  `json:"error"`
	Untokenizable string  `json:"untokenizable"`
}

// runLines runs a reference program that reads one JSON line per input and
// writes one JSON line per output.
func runLines(t testing.TB, cmd *exec.Cmd, inputs [][]byte) [][]byte {
	t.Helper()
	var in bytes.Buffer
	for _, b := range inputs {
		in.Write(b)
		in.WriteByte('\n')
	}
	var out, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = &in, &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd.Path, err, stderr.String())
	}
	var lines [][]byte
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<28)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	if len(lines) != len(inputs) {
		t.Fatalf("%s answered %d lines for %d inputs\n%s", cmd.Path, len(lines), len(inputs), stderr.String())
	}
	return lines
}

// pythonRender renders bodies with the Python reference (Debian's
// /usr/bin/python3 with python3-jinja2, checked by testenv).
func pythonRender(t testing.TB, tokenizerConfig string, trust bool, bodies [][]byte) []refResult {
	t.Helper()
	py := testenv.Python(t, "jinja2")
	args := []string{filepath.Join("testdata", "render_reference.py"), tokenizerConfig}
	if trust {
		args = append(args, "--trust-request-template")
	}
	lines := runLines(t, exec.Command(py, args...), bodies)
	out := make([]refResult, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal(l, &out[i]); err != nil {
			t.Fatalf("python reference line %d: %v", i+1, err)
		}
	}
	return out
}

// jsEncode encodes texts with @lenml/tokenizers in node.
func jsEncode(t testing.TB, family string, texts []string) [][]uint32 {
	t.Helper()
	modules := testenv.NodeModules(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not on PATH although the npm packages are installed: %v", err)
	}
	cmd := exec.Command(node, filepath.Join("testdata", "encode.mjs"), family)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	inputs := make([][]byte, len(texts))
	for i, s := range texts {
		if inputs[i], err = json.Marshal(s); err != nil {
			t.Fatal(err)
		}
	}
	lines := runLines(t, cmd, inputs)
	ids := make([][]uint32, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal(l, &ids[i]); err != nil {
			t.Fatalf("JS reference line %d: %v", i+1, err)
		}
	}
	return ids
}

// loadFamily loads a model family's files from the npm packages.
func loadFamily(t testing.TB, family string, opts Options) (*Model, testenv.ModelFiles) {
	t.Helper()
	files := testenv.Tokenizer(t, family)
	m, err := LoadModel(files.TokenizerJSON, files.TokenizerConfig, opts)
	if err != nil {
		t.Fatalf("loading %s: %v", family, err)
	}
	return m, files
}
