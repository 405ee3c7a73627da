package prompt_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/prompt"
)

// TestTokenCache: a growing conversation routes with the same ids through
// the prefix cache as with tokenizer.cache_bytes 0, the later turns reuse
// the earlier ones' text, and the collector exports the counters.
func TestTokenCache(t *testing.T) {
	files := testenv.Tokenizer(t, "qwen3")
	chatWith := func(n int64) *prompt.Chat {
		c, err := prompt.ChatFromConfig(&config.Config{Model: "qwen",
			Tokenizer: config.Tokenizer{JSON: files.TokenizerJSON, Config: files.TokenizerConfig, CacheBytes: &n}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cached, uncached := chatWith(1<<20), chatWith(0)
	if uncached.Cache != nil {
		t.Fatal("cache_bytes 0 made a cache")
	}
	var msgs []map[string]string
	for turn := range 6 {
		role := []string{"user", "assistant"}[turn%2]
		msgs = append(msgs, map[string]string{"role": role, "content": fmt.Sprintf("Turn %d. ", turn) +
			strings.Repeat(fmt.Sprintf("Message %d says something  about the cache's  %d words.\n", turn, turn*7), 60)})
		body, err := json.Marshal(map[string]any{"model": "qwen", "messages": msgs})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cached.Prompt(chat.PathChatCompletions, body)
		if err != nil {
			t.Fatal(err)
		}
		want, err := uncached.Prompt(chat.PathChatCompletions, body)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Tokens, want.Tokens) {
			t.Fatalf("turn %d: cached ids differ from uncached ones", turn)
		}
	}
	st := cached.Cache.Stats()
	if st.Hits < 5*4/2 || st.ReusedBytes == 0 {
		t.Errorf("later turns did not reuse earlier ones: %+v", st)
	}
	if got := series(t, cached); got["llmd_router_tokenizer_cache_lookups_total"] != 3 || got["llmd_router_tokenizer_cache_bytes"] != 1 ||
		len(got) != 6 {
		t.Errorf("collector series: %v", got)
	}
	if got := series(t, uncached); len(got) != 0 {
		t.Errorf("collector without a cache: %v", got)
	}
}

// series gathers the prompt collector's metrics: series per family.
func series(t *testing.T, c *prompt.Chat) map[string]int {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(prompt.Collector{Chat: c})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, f := range fams {
		out[f.GetName()] = len(f.GetMetric())
	}
	return out
}
