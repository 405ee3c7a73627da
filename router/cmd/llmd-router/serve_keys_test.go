package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestSaltedAdapterRequestsFindTheirBlocks runs two routers over two replica
// processes that serve a LoRA adapter. A request under the adapter with a
// cache_salt, served through router A, must be explained by router B, which
// never routed it (so no speculative entry stands in), as cached on the pod
// that served it: B learns it only from the KV events that replica published
// (the adapter's name and per-block extra keys, as vLLM sends them). The same
// tokens under another salt, without a salt, or on the base model must match
// no pod, as they match no block in the engine.
func TestSaltedAdapterRequestsFindTheirBlocks(t *testing.T) {
	files := testenv.Tokenizer(t, "qwen3")
	tok := []string{"--lora-adapters", "sql-lora", "--tokenizer", files.TokenizerJSON, "--tokenizer-config", files.TokenizerConfig}
	infos, _ := startReplicas(t, 2, append([]string{"--time-scale", "10"}, tok...)...)
	args := append([]string{"--block-size", "16"}, tok...)
	a, b := startRouter(t, infos, args...), startRouter(t, infos, args...)
	prompt := tokens(64, 11) // four 16-token blocks
	body := func(model, salt string) []byte {
		m := map[string]any{"model": model, "prompt": prompt, "max_tokens": 2}
		if salt != "" {
			m["cache_salt"] = salt
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	salted := body("sql-lora", "tenant-a")
	resp := send(t, a.url+"/v1/completions", salted)
	served := resp.Header.Get("X-Llmd-Pod")
	if resp.StatusCode != http.StatusOK || served == "" {
		t.Fatalf("status %d, pod %q", resp.StatusCode, served)
	}
	waitFor(t, "router B to learn the salted adapter request's blocks", func() bool {
		e := explain(t, b.url, salted)
		return e.Pod == served && e.Scores[e.Chosen].Hit.GPUBlocks == 4 && e.Scores[e.Chosen].Hit.Speculative == 0
	})
	for _, other := range []struct{ what, model, salt string }{
		{"another salt", "sql-lora", "tenant-b"},
		{"no salt", "sql-lora", ""},
		{"the base model", simModelName, "tenant-a"},
	} {
		e := explain(t, b.url, body(other.model, other.salt))
		if e.Untokenizable != "" || e.Blocks != 4 {
			t.Errorf("%s: explained as %+v", other.what, e)
		}
		for _, s := range e.Scores {
			if s.Hit.Blocks != 0 {
				t.Errorf("%s: pod %s credited with %d blocks", other.what, s.Pod, s.Hit.Blocks)
			}
		}
	}
}
