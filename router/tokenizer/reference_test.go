package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// refOptions are the options of testdata/reference.mjs.
type refOptions struct {
	AddSpecialTokens bool            `json:"add_special_tokens,omitempty"`
	DropAddedAbove   *uint32         `json:"drop_added_above,omitempty"`
	PostProcessor    json.RawMessage `json:"post_processor,omitempty"`
	Bench            bool            `json:"bench,omitempty"`
}

// runReference encodes texts with the JS reference in one node process and
// returns its ids, one slice per text.
func runReference(t testing.TB, family string, opts refOptions, texts []string) [][]uint32 {
	t.Helper()
	out := runNode(t, family, opts, texts)
	ids := make([][]uint32, 0, len(texts))
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for sc.Scan() {
		var v []uint32
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("reading JS reference output line %d: %v", len(ids)+1, err)
		}
		ids = append(ids, v)
	}
	if len(ids) != len(texts) {
		t.Fatalf("JS reference returned %d results for %d texts", len(ids), len(texts))
	}
	return ids
}

// runNode feeds texts (one JSON string per line) to reference.mjs and returns
// its standard output.
func runNode(t testing.TB, family string, opts refOptions, texts []string) []byte {
	t.Helper()
	modules := testenv.NodeModules(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not on PATH although the npm packages are installed: %v", err)
	}
	optJSON, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "reference.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "--max-old-space-size=4096", script, family, string(optJSON))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting node: %v", err)
	}
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		w := bufio.NewWriterSize(stdin, 1<<20)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, s := range texts {
			if writeErr = enc.Encode(s); writeErr != nil {
				break
			}
		}
		if err := w.Flush(); writeErr == nil {
			writeErr = err
		}
		stdin.Close()
	})
	wg.Wait()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node reference.mjs %s: %v\n%s", family, err, stderr.String())
	}
	if writeErr != nil {
		t.Fatalf("writing texts to node: %v", writeErr)
	}
	return stdout.Bytes()
}

// loadFamily loads the real tokenizer.json of a family, with the scanner
// (fast) or with every split on the regex oracle.
func loadFamily(t testing.TB, family string, fast bool) *Tokenizer {
	t.Helper()
	data, err := os.ReadFile(testenv.Tokenizer(t, family).TokenizerJSON)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := parse(data, fast)
	if err != nil {
		t.Fatalf("loading %s: %v", family, err)
	}
	return tk
}

// compareIDs encodes every text and reports the texts whose ids differ from want.
func compareIDs(t *testing.T, tk *Tokenizer, texts []string, want [][]uint32, addSpecial bool) {
	t.Helper()
	diffIDs(t, texts, encodeAll(t, tk, texts, addSpecial), want)
}

// diffIDs reports the texts whose ids differ, quoting the first few.
func diffIDs(t *testing.T, texts []string, got, want [][]uint32) {
	t.Helper()
	bad := 0
	for i, s := range texts {
		if !slices.Equal(got[i], want[i]) {
			bad++
			if bad <= 5 {
				t.Errorf("text %d %q:\n got %v\nwant %v", i, clip(s), clipIDs(got[i]), clipIDs(want[i]))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d texts differ", bad, len(texts))
	}
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}

func clipIDs(ids []uint32) []uint32 {
	if len(ids) > 40 {
		return ids[:40]
	}
	return ids
}
