package canary

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// canonical re-encodes a JSON body with sorted keys, so the test engine can
// find a body however the client ordered it.
func canonical(t testing.TB, body []byte) string {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("test engine got invalid JSON: %v", err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// referenceIDs computes the engine's answer for each sample independently
// of the package under test: chat bodies are rendered by the Python
// reference (jinja2 with the Hugging Face settings) and every text is
// encoded by the JS tokenizer (@lenml/tokenizers).
func referenceIDs(t *testing.T, files testenv.ModelFiles, samples []Sample) map[string][]uint32 {
	py := testenv.Python(t, "jinja2")
	var texts []string
	for _, s := range samples {
		if s.Path == chat.PathCompletions {
			var b struct{ Prompt string }
			if err := json.Unmarshal(s.Body, &b); err != nil {
				t.Fatal(err)
			}
			texts = append(texts, b.Prompt) // Qwen3 adds no special tokens to prompts
			continue
		}
		cmd := exec.Command(py, filepath.Join("..", "testdata", "render_reference.py"), files.TokenizerConfig)
		cmd.Stdin = bytes.NewReader(append(append([]byte(nil), s.Body...), '\n'))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("python reference: %v", err)
		}
		var r struct{ Text *string }
		if err := json.Unmarshal(out, &r); err != nil || r.Text == nil {
			t.Fatalf("python reference refused sample %s: %s", s.Body, out)
		}
		texts = append(texts, *r.Text)
	}
	var in bytes.Buffer
	for _, s := range texts {
		b, _ := json.Marshal(s)
		in.Write(append(b, '\n'))
	}
	cmd := exec.Command("node", filepath.Join("..", "testdata", "encode.mjs"), "qwen3")
	cmd.Env = append(os.Environ(), "NODE_PATH="+testenv.NodeModules(t))
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("JS reference: %v", err)
	}
	ids := map[string][]uint32{}
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var v []uint32
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatal(err)
		}
		ids[canonical(t, samples[i].Body)] = v
	}
	return ids
}

// testEngine stands in for one vLLM pod's tokenizer endpoints in this test:
// a real HTTP server answering /tokenize (or, when that is switched off,
// the render endpoints) with the reference ids, or with one id altered.
type testEngine struct {
	t        *testing.T
	ids      map[string][]uint32
	alter    atomic.Bool
	noTok    atomic.Bool // /tokenize answers 404
	noRender atomic.Bool // the render endpoints answer 404
	mu       sync.Mutex
	hits     map[string]int
}

func (e *testEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.hits[r.URL.Path]++
	e.mu.Unlock()
	key := "tokens"
	switch {
	case r.URL.Path == "/tokenize" && !e.noTok.Load():
	case strings.HasSuffix(r.URL.Path, "/render") && !e.noRender.Load():
		key = "prompt_token_ids"
	default:
		http.NotFound(w, r)
		return
	}
	var body bytes.Buffer
	body.ReadFrom(r.Body)
	ids, ok := e.ids[canonical(e.t, body.Bytes())]
	if !ok {
		http.Error(w, "unknown body", http.StatusBadRequest)
		return
	}
	ids = slices.Clone(ids)
	if e.alter.Load() {
		ids[len(ids)/2]++ // one id off, as a template drift would cause
	}
	json.NewEncoder(w).Encode(map[string]any{key: ids, "count": len(ids)})
}

// value reads a counter or gauge.
func value(t *testing.T, m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

func (e *testEngine) hitCount(path string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hits[path]
}

// TestCanaryAgainstEngine drives the canary against a real HTTP server
// through agreement, a mismatch (metric, log line, engine path with an HTTP
// call per request), agreement again (back to in-process), the render
// endpoint when /tokenize is missing, and an engine with neither.
func TestCanaryAgainstEngine(t *testing.T) {
	files := testenv.Tokenizer(t, "qwen3")
	local, err := chat.LoadModel(files.TokenizerJSON, files.TokenizerConfig, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	samples := DefaultSamples()
	eng := &testEngine{t: t, ids: referenceIDs(t, files, samples), hits: map[string]int{}}
	srv := httptest.NewServer(eng)
	defer srv.Close()

	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	g := New(Config{
		Model: "qwen3", Local: local, Pod: func() string { return srv.URL },
		Metrics: metrics, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	ctx := context.Background()
	check := func(want Result) {
		t.Helper()
		got, err := g.Check(ctx)
		if got != want {
			t.Fatalf("canary = %s (%v), want %s", got, err, want)
		}
	}
	count := func(r Result) float64 { return value(t, metrics.checks.WithLabelValues("qwen3", string(r))) }
	path := func() float64 { return value(t, metrics.enginePath.WithLabelValues("qwen3")) }

	check(Agree)
	if g.OnEnginePath() || path() != 0 || count(Agree) != 1 {
		t.Fatalf("after agreement: engine path %v, gauge %v, agree count %v", g.OnEnginePath(), path(), count(Agree))
	}

	eng.alter.Store(true)
	check(Mismatch)
	if !g.OnEnginePath() || path() != 1 || count(Mismatch) != 1 {
		t.Fatalf("after mismatch: engine path %v, gauge %v, mismatch count %v", g.OnEnginePath(), path(), count(Mismatch))
	}
	if !strings.Contains(logs.String(), "tokenizer canary mismatch") || !strings.Contains(logs.String(), "model=qwen3") {
		t.Fatalf("no mismatch log line:\n%s", logs.String())
	}
	// On the engine path each request is one HTTP call and gets the engine's ids.
	req, err := chat.ParseRequest(chat.PathChatCompletions, samples[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	before := eng.hitCount("/tokenize")
	ids, err := g.Tokenize(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	ours, _ := local.Tokenize(req)
	if eng.hitCount("/tokenize") != before+1 || slices.Equal(ids[0], ours[0]) {
		t.Fatalf("engine path: %d calls, ids equal to ours %v", eng.hitCount("/tokenize")-before, slices.Equal(ids[0], ours[0]))
	}

	eng.alter.Store(false)
	check(Agree)
	if g.OnEnginePath() || path() != 0 {
		t.Fatalf("after agreement again: engine path %v, gauge %v", g.OnEnginePath(), path())
	}
	before = eng.hitCount("/tokenize")
	if ids, err = g.Tokenize(ctx, req); err != nil || !slices.Equal(ids[0], ours[0]) || eng.hitCount("/tokenize") != before {
		t.Fatalf("in-process path: ids %v err %v, engine calls %d", ids, err, eng.hitCount("/tokenize")-before)
	}

	eng.noTok.Store(true)
	check(Agree)
	if eng.hitCount("/v1/chat/completions/render") == 0 || eng.hitCount("/v1/completions/render") == 0 {
		t.Fatalf("the render endpoints were not used when /tokenize was 404: %v", eng.hits)
	}
	eng.alter.Store(true)
	check(Mismatch)

	eng.noRender.Store(true)
	check(Unavailable)
	if !g.OnEnginePath() || count(Unavailable) != 1 {
		t.Fatalf("an unavailable engine changed the path: engine path %v", g.OnEnginePath())
	}
}
