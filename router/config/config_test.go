package config

import (
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"
)

const minimal = `
model: Qwen/Qwen2.5-7B-Instruct
discovery:
  kubernetes: {namespace: llm, selector: app=vllm}
`

// TestDefaults checks that a minimal file gets the documented defaults,
// including llm-d's 3:2:2 scorer mix and replay on.
func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	want := Ports{HTTP: DefaultHTTPPort, KVEvents: DefaultKVEventsPort, Replay: DefaultReplayPort}
	if c.Discovery.Ports != want {
		t.Errorf("ports %+v, want %+v", c.Discovery.Ports, want)
	}
	if c.Listen != DefaultListen {
		t.Errorf("listen %q", c.Listen)
	}
	if c.Metrics.Interval.Duration != 50*time.Millisecond || c.Metrics.StaleAfter.Duration != 2*time.Second ||
		c.Index.SpeculationTTL.Duration != 2*time.Second {
		t.Errorf("durations %+v %+v", c.Metrics, c.Index)
	}
	if !reflect.DeepEqual(c.Scoring.Scorers, DefaultScorers()) {
		t.Errorf("scorers %+v", c.Scoring.Scorers)
	}
	if n := c.Tokenizer.CacheBytes; n == nil || *n != DefaultTokenizerCacheBytes {
		t.Errorf("tokenizer.cache_bytes %v, want the default %d", n, DefaultTokenizerCacheBytes)
	}
	if got := c.Discovery.TopicFor("10.0.0.7", c.Discovery.Ports.HTTP, c.Model); got != "kv@10.0.0.7:8000@Qwen/Qwen2.5-7B-Instruct" {
		t.Errorf("topic %q", got)
	}
}

// TestExplicitReplayOff keeps a file's "replay: 0" when other ports are set:
// a fleet without replay must not be told to replay.
func TestExplicitReplayOff(t *testing.T) {
	c, err := Parse([]byte(minimal + "  ports: {http: 9000, replay: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Discovery.Ports != (Ports{HTTP: 9000, KVEvents: DefaultKVEventsPort}) {
		t.Errorf("ports %+v", c.Discovery.Ports)
	}
}

// TestTokenizerCacheOff keeps an explicit "cache_bytes: 0": off, not the
// default.
func TestTokenizerCacheOff(t *testing.T) {
	c, err := Parse([]byte(minimal + "tokenizer: {cache_bytes: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Tokenizer.CacheBytes; n == nil || *n != 0 {
		t.Errorf("tokenizer.cache_bytes %v, want 0", n)
	}
}

// TestTokenizerS3 accepts S3 URIs beside paths; the bucket and key are
// kept as written.
func TestTokenizerS3(t *testing.T) {
	c, err := Parse([]byte(minimal + "tokenizer: {json: 's3://models/qwen3/abc/tokenizer.json', config: /models/tokenizer_config.json}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tokenizer.JSON != "s3://models/qwen3/abc/tokenizer.json" || c.Tokenizer.Config != "/models/tokenizer_config.json" {
		t.Errorf("tokenizer %+v", c.Tokenizer)
	}
}

// TestRoundTrip renders a config as the provider would and parses it back.
func TestRoundTrip(t *testing.T) {
	c, err := Parse([]byte(`
model: m
lora_adapters: [sql]
listen: 127.0.0.1:9000
tokenizer: {json: /models/q/tokenizer.json, config: /models/q/tokenizer_config.json, cache_bytes: 1048576}
block_size: 16
discovery:
  static:
  - {name: a, ip: 10.0.0.1}
  - {name: b, http: "http://127.0.0.1:8001", kv_events: "tcp://127.0.0.1:5001", replay: "tcp://127.0.0.1:5002"}
  data_parallel_size: 2
metrics: {interval: 100ms, stale_after: 3s, timeout: 500ms}
index: {max_keys: 1000000, speculation_ttl: 1s}
scoring:
  scorers:
  - {type: prefix, weight: 3}
  - {type: cost, weight: 1, params: {prefill_tokens_per_second: 5000}}
`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !reflect.DeepEqual(c, back) {
		t.Errorf("round trip changed the config:\n%+v\n%+v\n%s", c, back, out)
	}
}

// TestErrorsNameTheKey checks that each mistake is reported under its key,
// all of them at once.
func TestErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", minimal + "scorers: []\n", []string{`unknown field "scorers"`}},
		{"tokenizer", minimal + "tokenizer: {json: /a}\nlora_adapters: [x, x, '']\n", []string{"tokenizer: set both json and config",
			`lora_adapters[1]: "x" is already lora_adapters[0]`, "lora_adapters[2]: must be a non-empty name"}},
		{"no model", "discovery: {kubernetes: {namespace: a, selector: b}}", []string{"model: must be set"}},
		{"no discovery", "model: m", []string{"discovery: set kubernetes or static"}},
		{"both sources", "model: m\ndiscovery: {kubernetes: {namespace: a, selector: b}, static: [{name: a, ip: 1.2.3.4}]}",
			[]string{"discovery: set kubernetes or static, not both"}},
		{"empty selector", "model: m\ndiscovery: {kubernetes: {namespace: a}}", []string{"discovery.kubernetes.selector: must be set"}},
		{"static", "model: m\ndiscovery: {static: [{name: a}, {name: a, ip: x, http: 'ftp://x', kv_events: 'udp://x'}]}",
			[]string{"discovery.static[0].ip: must be set", `discovery.static[1].name: "a" is listed twice`,
				"discovery.static[1].http: must be an http(s) URL", "discovery.static[1].kv_events: must be a tcp:// address"}},
		{"tokenizer s3", minimal + "tokenizer: {json: 's3://models', config: 's3:///qwen3/tokenizer_config.json'}\n",
			[]string{`tokenizer.json: "s3://models" lacks a bucket or a key: write s3://bucket/key`,
				`tokenizer.config: "s3:///qwen3/tokenizer_config.json" lacks a bucket or a key`}},
		{"tokenizer cache", minimal + "tokenizer: {cache_bytes: -1}\n", []string{"tokenizer.cache_bytes: must be >= 0 (0 turns the cache off)"}},
		{"data parallel", minimal + "  data_parallel_size: 9\n", []string{"discovery.data_parallel_size: must be 0 to 8"}},
		{"ports", minimal + "  ports: {http: 70000, kv_events: -1, replay: -2}\n",
			[]string{"discovery.ports.http: must be a port", "discovery.ports.kv_events: must be a port", "discovery.ports.replay: must be a port"}},
		{"durations", minimal + "metrics: {interval: 5s, stale_after: 1s, timeout: -1s}\n",
			[]string{"metrics.stale_after: must be at least metrics.interval", "metrics.timeout: must be positive"}},
		{"bad duration", minimal + "metrics: {interval: 5}\n", []string{"duration must be a string"}},
		{"peers without listen", minimal + "peers: {static: ['10.0.0.2:9092']}\n", []string{"peers.listen: must be set with peers.kubernetes or peers.static"}},
		{"peers", minimal + "peers: {listen: '9092', static: ['10.0.0.2', ':1'], kubernetes: {namespace: a, inference_pool: p}}\n",
			[]string{"peers.listen: must be host:port or :port", "peers: set kubernetes or static, not both", "peers.static[0]: must be host:port",
				"peers.static[1]: must be host:port", "peers.kubernetes.inference_pool: is not allowed", "peers.kubernetes.selector: must be set"}},
		{"scorers", minimal + "scoring: {scorers: [{type: prefix, weight: -1}, {weight: 1}, {type: prefix, weight: 1}]}\n",
			[]string{"scoring.scorers[0].weight: must be >= 0", "scoring.scorers[1].type: must be set",
				`scoring.scorers[2].type: "prefix" is already scorers[0]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestCgoFree keeps the package the provider renders with free of cgo and of
// router internals: it must build for every platform the provider ships on.
func TestCgoFree(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps with CGO_ENABLED=0: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		if strings.Contains(d, "zmq") || strings.HasPrefix(d, "github.com/llmd-dev/terraform-provider-llmd/") && d != "github.com/llmd-dev/terraform-provider-llmd/router/config" {
			t.Errorf("router/config depends on %s", d)
		}
	}
}

// TestUpstreamAndSilence checks the hardening settings: defaults, a
// negative timeout kept as off, and refusals naming their key.
func TestUpstreamAndSilence(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	want := Upstream{ResponseHeaderTimeout: Duration{DefaultResponseHeaderTimeout}, StreamIdleTimeout: Duration{DefaultStreamIdleTimeout},
		RequestTimeout: Duration{DefaultRequestTimeout}, Breaker: Breaker{Failures: DefaultBreakerFailures,
			OpenFor: Duration{DefaultBreakerOpenFor}, MaxOpenFor: Duration{DefaultBreakerMaxOpenFor}}}
	if c.Upstream != want || c.Discovery.KVEventsSilentAfter.Duration != DefaultKVEventsSilentAfter {
		t.Errorf("upstream %+v, silent after %s", c.Upstream, c.Discovery.KVEventsSilentAfter)
	}
	c, err = Parse([]byte(minimal + "upstream: {stream_idle_timeout: -1s, breaker: {failures: -1}}\n"))
	if err != nil || c.Upstream.StreamIdleTimeout.Duration != -time.Second || c.Upstream.Breaker.Failures != -1 {
		t.Errorf("off settings: %+v, %v", c, err)
	}
	for body, key := range map[string]string{
		minimal + "upstream: {breaker: {open_for: 5s, max_open_for: 2s}}\n":                                                  "upstream.breaker.max_open_for",
		minimal + "upstream: {breaker: {open_for: -1s}}\n":                                                                   "upstream.breaker.open_for",
		strings.Replace(minimal, "discovery:\n", "discovery:\n  kv_events_silent_after: -1s\n", 1):                           "discovery.kv_events_silent_after",
		"model: m\ndiscovery:\n  data_parallel_size: 8\n  static: [" + strings.Repeat("{name: p, ip: 10.0.0.1},", 9) + "]\n": "discovery.static",
	} {
		if _, err := Parse([]byte(body)); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: error %v does not name %s", body, err, key)
		}
	}
}

// TestStaticFleetBound accepts a static fleet of 256 pods, past the 64
// engines the index once tracked, and refuses one whose engines (pods x
// data-parallel ranks) exceed MaxEngines, naming the key.
func TestStaticFleetBound(t *testing.T) {
	static := func(pods, dp int) []byte {
		var b strings.Builder
		fmt.Fprintf(&b, "model: m\ndiscovery:\n  data_parallel_size: %d\n  static:\n", dp)
		for i := range pods {
			fmt.Fprintf(&b, "  - {name: p%d, ip: 10.0.%d.%d}\n", i, i/250, i%250+1)
		}
		return []byte(b.String())
	}
	if _, err := Parse(static(256, 1)); err != nil {
		t.Errorf("256 pods: %v", err)
	}
	pods := MaxEngines/8 + 1
	_, err := Parse(static(pods, 8))
	want := fmt.Sprintf("discovery.static: %d pods x 8 data-parallel ranks = %d engines, more than the block index tracks (%d)",
		pods, pods*8, MaxEngines)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%d pods at data parallel 8: error %v, want %q", pods, err, want)
	}
}
