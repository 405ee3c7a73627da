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

// runReference encodes texts with the JS reference and returns its ids, one
// slice per text. Large inputs are split between two node processes, which
// halves the wall time of the corpus tests on an idle two-core machine.
func runReference(t testing.TB, family string, opts refOptions, texts []string) [][]uint32 {
	t.Helper()
	shards := 1
	if len(texts) >= 4000 {
		shards = 2
	}
	outs := make([][]byte, shards)
	errs := make([]error, shards)
	modules := testenv.NodeModules(t)
	var wg sync.WaitGroup
	for i := range shards {
		part := texts[i*len(texts)/shards : (i+1)*len(texts)/shards]
		wg.Go(func() { outs[i], errs[i] = runNode(modules, family, opts, part) })
	}
	wg.Wait()
	ids := make([][]uint32, 0, len(texts))
	for i, out := range outs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 1<<30)
		for sc.Scan() {
			var v []uint32
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Fatalf("reading JS reference output line %d: %v", len(ids)+1, err)
			}
			ids = append(ids, v)
		}
	}
	if len(ids) != len(texts) {
		t.Fatalf("JS reference returned %d results for %d texts", len(ids), len(texts))
	}
	return ids
}

// runNode feeds texts (one JSON string per line) to reference.mjs and returns
// its standard output.
func runNode(modules, family string, opts refOptions, texts []string) ([]byte, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node not on PATH although the npm packages are installed: %w", err)
	}
	optJSON, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	script, err := filepath.Abs(filepath.Join("testdata", "reference.mjs"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(node, "--max-old-space-size=4096", script, family, string(optJSON))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting node: %w", err)
	}
	w := bufio.NewWriterSize(stdin, 1<<20)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	var writeErr error
	for _, s := range texts {
		if writeErr = enc.Encode(s); writeErr != nil {
			break
		}
	}
	if err := w.Flush(); writeErr == nil {
		writeErr = err
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("node reference.mjs %s: %w\n%s", family, err, stderr.String())
	}
	if writeErr != nil {
		return nil, fmt.Errorf("writing texts to node: %w", writeErr)
	}
	return stdout.Bytes(), nil
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
