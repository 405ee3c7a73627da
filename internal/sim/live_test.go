package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents/zmqtransport"
)

// startFleet serves n replicas on free loopback ports until the test ends.
func startFleet(t *testing.T, n int, rc ReplicaConfig) *Fleet {
	t.Helper()
	f, err := StartFleet(FleetConfig{Replica: rc, Replicas: n, Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	stop := f.Start(context.Background())
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("fleet: %v", err)
		}
	})
	return f
}

// follow subscribes the router's real ingestion to every replica's events.
func follow(t *testing.T, f *Fleet) *index.Index {
	t.Helper()
	ix := index.New(index.Config{})
	in, err := kvevents.New(kvevents.Config{Index: ix, Transport: &zmqtransport.Transport{}, Poll: 20 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	for _, info := range f.Infos {
		if err := in.Add(kvevents.Endpoint{Pod: info.Pod, Addr: info.KV, ReplayAddr: info.Replay}); err != nil {
			t.Fatal(err)
		}
	}
	return ix
}

// waitBlocks waits until the index says pod holds want leading blocks of tokens.
func waitBlocks(t *testing.T, ix *index.Index, pod string, tokens []uint32, want int) {
	t.Helper()
	keys := index.Keys(nil, tokens, 16, "", nil)
	deadline := time.Now().Add(10 * time.Second)
	got := 0
	for time.Now().Before(deadline) {
		got = 0
		for _, m := range ix.Lookup(keys, nil) {
			if m.Engine.Pod == pod {
				got = m.Blocks
			}
		}
		if got == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("index: %s holds %d leading blocks, want %d", pod, got, want)
}

func post(t *testing.T, url string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func decodeJSON(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d: %s", resp.Request.URL, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// sseChunk is the part of a streamed chunk the tests read.
type sseChunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
		Delta        struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// readSSE reads a stream to its [DONE], failing on anything malformed.
func readSSE(t *testing.T, resp *http.Response) []sseChunk {
	t.Helper()
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("stream: status %d, content type %q", resp.StatusCode, ct)
	}
	var chunks []sseChunk
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("stream line %q is not an SSE data line", line)
		}
		if data == "[DONE]" {
			if sc.Scan() && sc.Text() != "" || sc.Scan() {
				t.Fatalf("data after [DONE]: %q", sc.Text())
			}
			return chunks
		}
		var c sseChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		chunks = append(chunks, c)
	}
	t.Fatalf("stream ended without [DONE] (%v)", sc.Err())
	return nil
}

func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	return testenv.ScrapeMetrics(t, base)
}

func metricValue(t *testing.T, fams map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil || len(f.Metric) != 1 {
		t.Fatalf("metric %s missing or not single", name)
	}
	m := f.Metric[0]
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatalf("metric %s has no value", name)
	return 0
}

func sequence(n int, from uint32) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = from + uint32(i)
	}
	return s
}

func TestReplicaServesOpenAIMetricsAndEvents(t *testing.T) {
	files := testenv.Tokenizer(t, "qwen3")
	model, err := chat.LoadModel(files.TokenizerJSON, files.TokenizerConfig, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok := model.Tokenizer()
	for _, form := range []kvevents.Form{kvevents.FormMap, kvevents.FormArray} {
		t.Run(form.String(), func(t *testing.T) {
			rc := ReplicaConfig{Model: "Qwen/Qwen2.5-7B-Instruct", Engine: DefaultEngineConfig(), TimeScale: 50,
				Chat: model, Form: form, BufferSteps: 1000}
			f := startFleet(t, 2, rc)
			ix := follow(t, f)
			r0, r1 := f.Infos[0].HTTP, f.Infos[1].HTTP

			// Streamed completion of a token-id prompt, with usage.
			prompt := sequence(64, 1000)
			chunks := readSSE(t, post(t, r0+"/v1/completions", map[string]any{"model": rc.Model, "prompt": prompt,
				"max_tokens": 20, "stream": true, "stream_options": map[string]any{"include_usage": true}, "ignore_eos": true}))
			if len(chunks) != 21 || chunks[20].Usage == nil || len(chunks[20].Choices) != 0 {
				t.Fatalf("want 20 token chunks and a usage chunk, got %d chunks", len(chunks))
			}
			for i, c := range chunks[:20] {
				fin := c.Choices[0].FinishReason
				if c.Object != "text_completion" || len(c.Choices[0].Text) != 1 || (fin != nil) != (i == 19) || (fin != nil && *fin != "length") {
					t.Fatalf("chunk %d: %+v", i, c)
				}
			}
			if u := chunks[20].Usage; u.PromptTokens != 64 || u.CompletionTokens != 20 || u.TotalTokens != 84 {
				t.Fatalf("usage %+v", u)
			}
			waitBlocks(t, ix, "sim-0", prompt, 4)

			// Whole chat completion: the prompt is the model's chat template
			// rendering (Qwen's ChatML framing for these messages), tokenized.
			msgs := []map[string]any{{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello, my dog is cute"}}
			var chat struct {
				Object  string `json:"object"`
				Choices []struct {
					Message struct{ Role, Content string } `json:"message"`
				} `json:"choices"`
				Usage usage `json:"usage"`
			}
			decodeJSON(t, post(t, r1+"/v1/chat/completions", map[string]any{"model": rc.Model, "messages": msgs, "max_tokens": 7}), &chat)
			rendered := "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHello, my dog is cute<|im_end|>\n<|im_start|>assistant\n"
			chatIDs, err := tok.Encode(rendered, false)
			if err != nil {
				t.Fatal(err)
			}
			if chat.Object != "chat.completion" || len(chat.Choices) != 1 || chat.Choices[0].Message.Role != "assistant" ||
				len(chat.Choices[0].Message.Content) != 7 || chat.Usage.PromptTokens != len(chatIDs) || chat.Usage.CompletionTokens != 7 {
				t.Fatalf("chat response %+v, want 7 letters on a %d-token prompt", chat, len(chatIDs))
			}
			waitBlocks(t, ix, "sim-1", chatIDs, len(chatIDs)/16)

			// Streamed chat: role first, content per token.
			sc := readSSE(t, post(t, r1+"/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 3, "stream": true}))
			if len(sc) != 4 || sc[0].Object != "chat.completion.chunk" || sc[0].Choices[0].Delta.Role != "assistant" ||
				sc[0].Choices[0].Delta.Content != "" || len(sc[3].Choices[0].Delta.Content) != 1 || *sc[3].Choices[0].FinishReason != "length" {
				t.Fatalf("chat stream %+v", sc)
			}

			// /tokenize against the independent reference ids (TESTING.md), and render against /tokenize.
			var tk struct {
				Count  int      `json:"count"`
				Tokens []uint32 `json:"tokens"`
			}
			decodeJSON(t, post(t, r0+"/tokenize", map[string]any{"prompt": "Hello, my dog is cute"}), &tk)
			if fmt.Sprint(tk.Tokens) != "[9707 11 847 5562 374 18838]" || tk.Count != 6 {
				t.Fatalf("/tokenize = %+v", tk)
			}
			var rd struct {
				Prompt string   `json:"prompt"`
				IDs    []uint32 `json:"prompt_token_ids"`
			}
			decodeJSON(t, post(t, r0+"/v1/completions/render", map[string]any{"prompt": "Hello, my dog is cute"}), &rd)
			if fmt.Sprint(rd.IDs) != fmt.Sprint(tk.Tokens) {
				t.Fatalf("/v1/completions/render = %v, /tokenize %v", rd.IDs, tk.Tokens)
			}
			decodeJSON(t, post(t, r0+"/v1/chat/completions/render", map[string]any{"messages": msgs}), &rd)
			decodeJSON(t, post(t, r0+"/tokenize", map[string]any{"messages": msgs}), &tk)
			if rd.Prompt != rendered || fmt.Sprint(rd.IDs) != fmt.Sprint(chatIDs) || fmt.Sprint(tk.Tokens) != fmt.Sprint(chatIDs) {
				t.Fatalf("render %q %v / tokenize %v, want %q %v", rd.Prompt, rd.IDs, tk.Tokens, rendered, chatIDs)
			}

			// The same prompt again: 3 full blocks come from the cache (the last token is always computed).
			var again struct{ Usage usage }
			decodeJSON(t, post(t, r0+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 2}), &again)
			fams := scrape(t, r0)
			for name, want := range map[string]float64{
				"vllm:prefix_cache_queries_total":            128,
				"vllm:prefix_cache_hits_total":               48,
				"vllm:generation_tokens_total":               22,
				"vllm:request_success_total":                 2,
				"vllm:time_to_first_token_seconds":           2,
				"vllm:request_time_per_output_token_seconds": 2,
				"vllm:num_requests_running":                  0,
				"vllm:num_requests_waiting":                  0,
				"llmd_sim_time_scale":                        50,
			} {
				if got := metricValue(t, fams, name); got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			info := fams["vllm:cache_config_info"].Metric[0]
			labels := map[string]string{}
			for _, l := range info.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["block_size"] != "16" || labels["num_gpu_blocks"] != fmt.Sprint(rc.Engine.NumGPUBlocks) {
				t.Errorf("cache_config_info labels %v", labels)
			}
			if u := metricValue(t, fams, "vllm:kv_cache_usage_perc"); u != 0 {
				t.Errorf("idle KV usage %v", u)
			}

			// A router that starts late learns the cache through replay alone.
			late := follow(t, f)
			waitBlocks(t, late, "sim-0", prompt, 4)
			waitBlocks(t, late, "sim-1", chatIDs, len(chatIDs)/16)

			// A prefix-cache reset reaches the router as AllBlocksCleared.
			resp := post(t, r0+"/reset_prefix_cache", nil)
			resp.Body.Close()
			waitBlocks(t, ix, "sim-0", prompt, 0)
			waitBlocks(t, ix, "sim-1", chatIDs, len(chatIDs)/16)
		})
	}
}

// TestReplicaAbortsDisconnectedClient checks that a client that hangs up
// mid-stream frees its request in the engine.
func TestReplicaAbortsDisconnectedClient(t *testing.T) {
	f := startFleet(t, 1, ReplicaConfig{Model: "m", Engine: DefaultEngineConfig(), TimeScale: 1})
	base := f.Infos[0].HTTP
	ctx, cancel := context.WithCancel(context.Background())
	body, _ := json.Marshal(map[string]any{"prompt": sequence(32, 5), "max_tokens": 5000, "stream": true})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q: %v", line, err)
	}
	// The gauge is the engine's view, published between its steps: it may lag the first chunk by a step.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := metricValue(t, scrape(t, base), "vllm:num_requests_running")
		if got == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("running %v while streaming", got)
		}
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for metricValue(t, scrape(t, base), "vllm:num_requests_running") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("request still running after its client went away")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if u := metricValue(t, scrape(t, base), "vllm:kv_cache_usage_perc"); u != 0 {
		t.Fatalf("aborted request still holds KV: usage %v", u)
	}
}

// TestReplicaStreamHeadersComeBeforeTokens checks that a streamed request
// queued behind a full batch gets its headers at once, as vLLM answers a
// stream's headers before the engine schedules it (the router's response-
// header timeout relies on it: a queue is not a hung pod), and that a
// request the engine refuses gets a plain 400 instead of a stream.
func TestReplicaStreamHeadersComeBeforeTokens(t *testing.T) {
	ec := DefaultEngineConfig()
	ec.MaxNumSeqs = 1
	f := startFleet(t, 1, ReplicaConfig{Model: "m", Engine: ec, TimeScale: 1})
	base := f.Infos[0].HTTP
	running := post(t, base+"/v1/completions", map[string]any{"prompt": sequence(32, 1), "max_tokens": 5000,
		"stream": true, "ignore_eos": true})
	defer running.Body.Close()
	waitGauge(t, base, "vllm:num_requests_running", 1)

	// The batch holds one sequence decoding for minutes: the second cannot
	// get a token while this test runs, so only headers sent at admission
	// end the wait below.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"prompt": sequence(32, 500), "max_tokens": 10, "stream": true})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	queued, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("headers of a queued stream: %v", err)
	}
	defer queued.Body.Close()
	if ct := queued.Header.Get("Content-Type"); queued.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("queued stream: status %d, content type %q", queued.StatusCode, ct)
	}
	waitGauge(t, base, "vllm:num_requests_waiting", 1)

	tooLong := post(t, base+"/v1/completions", map[string]any{"prompt": sequence(ec.NumGPUBlocks*ec.BlockSize, 1),
		"max_tokens": 1, "stream": true})
	b, _ := io.ReadAll(tooLong.Body)
	tooLong.Body.Close()
	if tooLong.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "exceed the KV cache") {
		t.Fatalf("refused stream: %d %s", tooLong.StatusCode, b)
	}
}

// waitGauge waits until the replica's gauge reads want; the engine
// publishes its gauges between steps, so they may lag a request by a step.
func waitGauge(t *testing.T, base, name string, want float64) {
	t.Helper()
	var got float64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = metricValue(t, scrape(t, base), name); got == want {
			return
		}
	}
	t.Fatalf("%s = %v, want %v", name, got, want)
}

// TestReplicaWithoutTokenizerNeedsTokenIDs checks the tokenizer is optional.
func TestReplicaWithoutTokenizerNeedsTokenIDs(t *testing.T) {
	f := startFleet(t, 1, ReplicaConfig{Model: "m", Engine: DefaultEngineConfig(), TimeScale: 100})
	base := f.Infos[0].HTTP
	resp := post(t, base+"/v1/completions", map[string]any{"prompt": "text", "max_tokens": 2})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "token ids") {
		t.Fatalf("text prompt without tokenizer: %d %s", resp.StatusCode, b)
	}
	resp = post(t, base+"/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": "hi"}}})
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "chat template") {
		t.Fatalf("chat request without a chat template: %d %s", resp.StatusCode, b)
	}
	var out struct {
		Choices []struct{ Text string } `json:"choices"`
	}
	decodeJSON(t, post(t, base+"/v1/completions", map[string]any{"prompt": sequence(20, 1), "max_tokens": 4}), &out)
	if len(out.Choices) != 1 || len(out.Choices[0].Text) != 4 {
		t.Fatalf("token-id prompt: %+v", out)
	}
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	getResp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	decodeJSON(t, getResp, &models)
	if len(models.Data) != 1 || models.Data[0].ID != "m" {
		t.Fatalf("/v1/models %+v", models)
	}
	h, err := http.Get(base + "/health")
	if err != nil || h.StatusCode != http.StatusOK {
		t.Fatalf("/health: %v %v", h, err)
	}
	h.Body.Close()
}

// TestReplicaReportsLag runs an engine a million times faster than the GPU,
// which no process can keep up with, and checks that it says so.
func TestReplicaReportsLag(t *testing.T) {
	f := startFleet(t, 1, ReplicaConfig{Model: "m", Engine: DefaultEngineConfig(), TimeScale: 1e6})
	base := f.Infos[0].HTTP
	var out struct{ Usage usage }
	decodeJSON(t, post(t, base+"/v1/completions", map[string]any{"prompt": sequence(64, 1), "max_tokens": 500}), &out)
	if out.Usage.CompletionTokens != 500 {
		t.Fatalf("usage %+v", out.Usage)
	}
	// 500 steps of ~50 ms engine time are scheduled within ~25 µs of wall time.
	fams := scrape(t, base)
	lag, peak := metricValue(t, fams, "llmd_sim_lag_seconds"), metricValue(t, fams, "llmd_sim_lag_max_seconds")
	if lag <= 25e-6 || peak < lag {
		t.Fatalf("lag %v s (max %v s) at time scale 1e6", lag, peak)
	}
}

// TestReplicaShutdownEndsRequests stops a fleet under a streamed and a
// whole request: both must end, with an error rather than a hang.
func TestReplicaShutdownEndsRequests(t *testing.T) {
	f, err := StartFleet(FleetConfig{Replica: ReplicaConfig{Model: "m", Engine: DefaultEngineConfig(), TimeScale: 1},
		Replicas: 1, Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- f.Serve(ctx) }()
	base := f.Infos[0].HTTP
	stream := post(t, base+"/v1/completions", map[string]any{"prompt": sequence(32, 1), "max_tokens": 5000, "stream": true})
	defer stream.Body.Close()
	lines := bufio.NewScanner(stream.Body)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "data: ") {
		t.Fatalf("no first chunk: %v", lines.Err())
	}
	whole := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":[1,2,3],"max_tokens":5000}`))
		if err != nil {
			t.Error(err)
		}
		whole <- resp
	}()
	deadline := time.Now().Add(5 * time.Second)
	for metricValue(t, scrape(t, base), "vllm:num_requests_running") != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the whole request never started running")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	sawError := false
	for lines.Scan() {
		sawError = sawError || strings.Contains(lines.Text(), `"error"`)
	}
	if !sawError {
		t.Fatal("streamed request ended without an error event")
	}
	if resp := <-whole; resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("whole request at shutdown: %+v", resp)
	} else {
		resp.Body.Close()
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
