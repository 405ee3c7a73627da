package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat/chattest"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/prompt"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// The tests of this package run the real Server over the real discovery
// fleet, picker, index and Qwen tokenizer, in front of stand-in pods:
// httptest servers answering as vLLM would, or as a sick vLLM does.

// qwen is the real Qwen3 chat model, loaded once per test process.
var qwen = chattest.Qwen3

// idleMetrics reads r's body and, when r is a scrape, answers it as an idle
// vLLM pod's /metrics and reports true.
func idleMetrics(w http.ResponseWriter, r *http.Request) bool {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.URL.Path != "/metrics" {
		return false
	}
	_, _ = io.WriteString(w, "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0\n"+
		`vllm:cache_config_info{block_size="16",num_gpu_blocks="4096"} 1`+"\n")
	return true
}

// okPod is a stand-in pod that reads the request and answers 200 with a
// small JSON body, as vLLM answers a completion.
func okPod(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if idleMetrics(w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"cmpl-1","object":"text_completion","choices":[]}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// newServer builds a Server routing to pods (name -> base URL) with the
// default scorers (unless cfg brings its own Picker), the Qwen3 model under
// the name "m", and cfg's limits.
func newServer(t testing.TB, pods map[string]string, cfg Config) (*Server, *discovery.Fleet) {
	return newServerScraping(t, pods, cfg, config.Metrics{Interval: config.Duration{Duration: 50 * time.Millisecond},
		StaleAfter: config.Duration{Duration: 2 * time.Second}, Timeout: config.Duration{Duration: time.Second}})
}

// newServerScraping is newServer with discovery scraping as metrics says.
func newServerScraping(t testing.TB, pods map[string]string, cfg Config, metrics config.Metrics) (*Server, *discovery.Fleet) {
	cat := chat.NewCatalog()
	cat.AddModel("m", qwen(t))
	ws, err := scoring.FromConfig(config.Scoring{Scorers: config.DefaultScorers()})
	if err != nil {
		t.Fatal(err)
	}
	fleet := discovery.NewFleet(discovery.FleetConfig{Metrics: metrics})
	list := make([]discovery.Pod, 0, len(pods))
	for name, url := range pods {
		list = append(list, discovery.Pod{Name: name, HTTP: url})
	}
	if err := fleet.Update(list); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Update(nil) })
	cfg.Fleet = fleet
	if cfg.Picker == nil {
		cfg.Picker = scoring.NewPicker(index.New(index.Config{BlockSize: 16}), ws)
	}
	cfg.Prompter = &prompt.Chat{Catalog: cat}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, fleet
}
