package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// variant is one tokenizer the exactness tests compare: a family's real
// tokenizer.json, possibly edited the same way on the Go and the JS side.
type variant struct {
	name       string
	family     string
	addSpecial bool
	// dropAddedAbove removes added tokens with a larger id (Qwen2.5 is Qwen3
	// without the four tokens after 151664).
	dropAddedAbove *uint32
	// postProcessor replaces the file's post_processor.
	postProcessor json.RawMessage
}

var qwen25Last = uint32(151664)

// llama3Template is the post_processor of Meta's later Llama 3 tokenizer.json,
// which prepends <|begin_of_text|>; the packaged file predates it.
var llama3Template = json.RawMessage(`{"type":"Sequence","processors":[
	{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true},
	{"type":"TemplateProcessing",
	 "single":[{"SpecialToken":{"id":"<|begin_of_text|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],
	 "pair":[{"SpecialToken":{"id":"<|begin_of_text|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}},
	         {"SpecialToken":{"id":"<|begin_of_text|>","type_id":1}},{"Sequence":{"id":"B","type_id":1}}],
	 "special_tokens":{"<|begin_of_text|>":{"id":"<|begin_of_text|>","ids":[128000],"tokens":["<|begin_of_text|>"]}}}]}`)

var (
	qwen3V          = variant{name: "qwen3", family: "qwen3"}
	qwen25V         = variant{name: "qwen2.5", family: "qwen3", dropAddedAbove: &qwen25Last}
	llama3V         = variant{name: "llama3", family: "llama3"}
	llama3TemplateV = variant{name: "llama3-template+special", family: "llama3", postProcessor: llama3Template, addSpecial: true}
	deepseekV       = variant{name: "deepseek_v3", family: "deepseek_v3"}
	variants        = []variant{qwen3V, qwen25V, llama3V, llama3TemplateV, deepseekV}
)

func (v variant) refOptions() refOptions {
	return refOptions{AddSpecialTokens: v.addSpecial, DropAddedAbove: v.dropAddedAbove, PostProcessor: v.postProcessor}
}

// loaded memoizes variant.load: a Tokenizer is immutable, and loading one
// takes a second or more on a busy machine.
var (
	loadedMu sync.Mutex
	loaded   = map[string]*Tokenizer{}
)

// load returns the variant's Go tokenizer (fast: scanners, else regex oracle).
func (v variant) load(t testing.TB, fast bool) *Tokenizer {
	t.Helper()
	key := fmt.Sprintf("%s/%v/%v", v.name, v.addSpecial, fast)
	loadedMu.Lock()
	defer loadedMu.Unlock()
	if tk, ok := loaded[key]; ok {
		return tk
	}
	data, err := os.ReadFile(testenv.Tokenizer(t, v.family).TokenizerJSON)
	if err != nil {
		t.Fatal(err)
	}
	if v.dropAddedAbove != nil || v.postProcessor != nil {
		data = editTokenizerJSON(t, data, v.dropAddedAbove, v.postProcessor)
	}
	tk, err := parse(data, fast)
	if err != nil {
		t.Fatalf("loading %s: %v", v.name, err)
	}
	loaded[key] = tk
	return tk
}

func editTokenizerJSON(t testing.TB, data []byte, dropAbove *uint32, post json.RawMessage) []byte {
	t.Helper()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if dropAbove != nil {
		var added []map[string]any
		if err := json.Unmarshal(doc["added_tokens"], &added); err != nil {
			t.Fatal(err)
		}
		kept := added[:0]
		for _, a := range added {
			if uint32(a["id"].(float64)) <= *dropAbove {
				kept = append(kept, a)
			}
		}
		if len(kept) == len(added) {
			t.Fatalf("no added token above id %d to drop", *dropAbove)
		}
		doc["added_tokens"], _ = json.Marshal(kept)
	}
	if post != nil {
		doc["post_processor"] = post
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// jsDiverges reports whether s holds a construct on which the JS reference
// departs from Hugging Face's tokenizers, whose split regex runs on
// Oniguruma: JavaScript's \s includes U+FEFF and excludes U+0085 (Oniguruma's
// is Unicode White_Space: the reverse); and node's Unicode 17 tables give classes to code points that are
// unassigned in Unicode 15.0, the tables of Go and of the Oniguruma that
// tokenizers bundles. Such texts are checked against the regex oracle instead.
func jsDiverges(s string) bool {
	if strings.ContainsAny(s, "\u0085\ufeff") {
		return true
	}
	for _, r := range s {
		if r >= 0x80 && !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs) {
			return true
		}
	}
	return false
}

// checkExact compares texts with the JS reference for one variant, and the
// texts where the reference is known to diverge with the regex oracle.
func checkExact(t *testing.T, v variant, texts []string) {
	fast := v.load(t, true)
	var ref, oracle []string
	for _, s := range texts {
		if jsDiverges(s) {
			if !longSFolds(s) { // neither reference can judge the rest
				oracle = append(oracle, s)
			}
		} else {
			ref = append(ref, s)
		}
	}
	// Encode on the Go side while node works on the other core.
	type result struct {
		ids [][]uint32
		err error
	}
	ours := make(chan result, 1)
	go func() {
		var r result
		r.ids = make([][]uint32, len(ref))
		for i, s := range ref {
			if r.ids[i], r.err = fast.Encode(s, v.addSpecial); r.err != nil {
				break
			}
		}
		ours <- r
	}()
	want := runReference(t, v.family, v.refOptions(), ref)
	got := <-ours
	if got.err != nil {
		t.Fatalf("Encode: %v", got.err)
	}
	diffIDs(t, ref, got.ids, want)
	if len(oracle) > 0 {
		slow := v.load(t, false)
		compareIDs(t, fast, oracle, encodeAll(t, slow, oracle, v.addSpecial), v.addSpecial)
	}
	var bytes int
	for _, s := range ref {
		bytes += len(s)
	}
	t.Logf("%s: %d texts (%d bytes) identical to the JS reference, %d checked against the regex oracle", v.name, len(ref), bytes, len(oracle))
}

// encodeAll encodes every text, failing the test on an error.
func encodeAll(t testing.TB, tk *Tokenizer, texts []string, addSpecial bool) [][]uint32 {
	t.Helper()
	out := make([][]uint32, len(texts))
	for i, s := range texts {
		ids, err := tk.Encode(s, addSpecial)
		if err != nil {
			t.Fatalf("Encode(%q): %v", clip(s), err)
		}
		out[i] = ids
	}
	return out
}

// TestExactGenerated compares 22,000 generated texts (2,000 per category, see
// generate_test.go) with the JS reference on every variant. Qwen3 runs
// without special tokens and Llama 3 with the template with them;
// TestAddSpecial checks the other way round for both.
func TestExactGenerated(t *testing.T) {
	texts := generatedTexts(2000)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel() // the node processes can then use both cores
			checkExact(t, v, texts)
		})
	}
}
