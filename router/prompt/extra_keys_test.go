package prompt_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/prompt"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// storedByPython encodes, with Debian's python3-msgpack, the BlockStored a
// recent vLLM sends for a request's full blocks: map form, lora_name, and
// per block the extra-keys tuple (adapter name, then cache_salt on the first
// block only).
func storedByPython(t *testing.T, tokens []uint32, blockSize int, lora, salt string) []byte {
	t.Helper()
	args, err := json.Marshal(map[string]any{"tokens": tokens, "bs": blockSize, "lora": lora, "salt": salt})
	if err != nil {
		t.Fatal(err)
	}
	const program = `
import json, sys, msgpack
a = json.loads(sys.argv[1])
n = len(a["tokens"]) // a["bs"]
extra = []
for i in range(n):
    keys = ([a["lora"]] if a["lora"] else []) + ([a["salt"]] if i == 0 and a["salt"] else [])
    extra.append(tuple(keys) if keys else None)
ev = {"type": "BlockStored", "block_hashes": [1000 + i for i in range(n)], "parent_block_hash": None,
      "token_ids": a["tokens"][: n * a["bs"]], "block_size": a["bs"], "medium": "GPU"}
if a["lora"]:
    ev["lora_name"] = a["lora"]
if any(x is not None for x in extra):
    ev["extra_keys"] = extra
sys.stdout.write(msgpack.packb({"ts": 1.5, "events": [ev]}).hex())
`
	out, err := exec.Command(testenv.Python(t, "msgpack"), "-c", program, string(args)).Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	payload, err := hex.DecodeString(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

// TestAdapterAndSaltRequestsMatchEngineBlocks stores, as engines would
// report them, the blocks of requests under a LoRA adapter with a
// cache_salt (short and past 31 bytes, where msgpack's string header
// changes), and checks that the same request, as the Chat prompter reads it,
// matches every block on that engine only, while the same tokens under
// another salt, no salt or no adapter match nothing.
func TestAdapterAndSaltRequestsMatchEngineBlocks(t *testing.T) {
	const bs = 16
	p := &prompt.Chat{Catalog: qwenCatalog(t)}
	ids := make([]string, 3*bs+5)
	for i := range ids {
		ids[i] = fmt.Sprint(100 + i)
	}
	prompt := "[" + strings.Join(ids, ",") + "]"
	request := func(model, salt string) *scoring.Request {
		t.Helper()
		body := `{"model":"` + model + `","prompt":` + prompt
		if salt != "" {
			body += `,"cache_salt":"` + salt + `"`
		}
		r, err := p.Prompt(chat.PathCompletions, []byte(body+"}"))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	longSalt := strings.Repeat("tenant-b/", 5)
	ix := index.New(index.Config{BlockSize: bs})
	applier := kvevents.Applier{Index: ix}
	engines := map[string]struct{ model, lora, salt string }{
		"pod-short": {"sql-adapter", "sql-adapter", "tenant-a"},
		"pod-long":  {"sql-adapter", "sql-adapter", longSalt},
		"pod-base":  {"qwen", "", "tenant-a"},
	}
	for pod, e := range engines {
		var b kvevents.Batch
		if err := kvevents.DecodeBatch(storedByPython(t, request(e.model, e.salt).Tokens, bs, e.lora, e.salt), &b); err != nil {
			t.Fatal(err)
		}
		for i := range b.Events {
			if err := applier.Apply(index.Engine{Pod: pod}, &b.Events[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		model, salt string
		want        map[string]int
	}{
		{"sql-adapter", "tenant-a", map[string]int{"pod-short": 3}},
		{"sql-adapter", longSalt, map[string]int{"pod-long": 3}},
		{"qwen", "tenant-a", map[string]int{"pod-base": 3}},
		{"sql-adapter", "tenant-c", nil},
		{"sql-adapter", "", nil},
		{"qwen", "", nil},
	} {
		r := request(tc.model, tc.salt)
		got := map[string]int{}
		for _, m := range ix.Lookup(index.Keys(nil, r.Tokens, bs, r.LoRA, r.Extra), nil) {
			if m.Blocks > 0 {
				got[m.Engine.Pod] = m.Blocks
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("model %s salt %q matches %v, want %v", tc.model, tc.salt, got, tc.want)
		}
	}
}
