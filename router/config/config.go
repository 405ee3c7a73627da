package config

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Config is the whole file. Keys are snake_case, as Terraform attributes are.
type Config struct {
	// Model is the served model name, checked against requests' "model" and
	// used in the default KV-event topic.
	Model string `json:"model"`
	// LoRAAdapters are the adapter names served on top of Model; their
	// requests are tokenized with Model's tokenizer and keyed apart.
	LoRAAdapters []string `json:"lora_adapters,omitempty"`
	// Listen is the router's serving address.
	Listen string `json:"listen"`
	// Tokenizer locates Model's tokenizer files, which the router reads at
	// start from the engines' read-only volume or from the S3 bucket they
	// stream the weights from. Without them requests route on load alone.
	Tokenizer Tokenizer `json:"tokenizer"`
	// BlockSize is vLLM's --block-size; 0 learns it from the first
	// BlockStored event. A fleet whose events disagree is counted.
	BlockSize int `json:"block_size,omitempty"`
	// Discovery says which pods exist and how to reach them.
	Discovery Discovery `json:"discovery"`
	// Metrics configures load scraping.
	Metrics Metrics `json:"metrics"`
	// Index bounds the block index.
	Index Index `json:"index"`
	// Scoring lists the scorers and their weights.
	Scoring Scoring `json:"scoring"`
	// Upstream bounds the router's requests to pods and ejects sick pods.
	Upstream Upstream `json:"upstream"`
	// Peers shares decisions with the other replicas of this router.
	Peers Peers `json:"peers"`
	// Autoscaling is the router's part in its fleet's autoscaling; nil:
	// none.
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`
}

// Autoscaling configures the router's part in its fleet's autoscaling
// (package autoscale): the External metrics API its HPA reads the demand
// from, and scaling the fleet from and to zero. Both need
// discovery.kubernetes with a selector (the fleet's pods).
type Autoscaling struct {
	// MetricsListen serves external.metrics.k8s.io/v1beta1 over TLS to the
	// API server's aggregation layer on this address (e.g. ":6443"); ""
	// turns it off.
	MetricsListen string `json:"metrics_listen,omitempty"`
	// Deployment is the fleet's Deployment, in discovery.kubernetes'
	// namespace, which the router scales from zero when a request finds no
	// pod (the request waits up to its class's time-to-live); "" never
	// scales it.
	Deployment string `json:"deployment,omitempty"`
	// ScaleToZeroAfter takes the fleet to zero replicas after this long with
	// no demand; 0 never does. Needs Deployment.
	ScaleToZeroAfter Duration `json:"scale_to_zero_after,omitempty"`
}

// Peers configures the exchange between the replicas of one router
// (DESIGN.md decision 10, package peers): each tells the others the
// speculative entries and in-flight counts of its decisions, and a starting
// replica warms its index from one of them.
type Peers struct {
	// Listen is where this replica serves its peers (gRPC, e.g. ":9092");
	// "" turns the exchange off.
	Listen string `json:"listen,omitempty"`
	// Kubernetes finds the peers: the router's own pods by label selector
	// in a namespace (inference_pool is not allowed), reached on Listen's
	// port. This replica finds itself among them and skips itself.
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
	// Static lists the peers as host:port; this replica's own address may
	// be among them.
	Static []string `json:"static,omitempty"`
	// WarmStart bounds how long a starting replica waits for a peer's index
	// before it replays every pod from seq 0 instead (default 10s; negative
	// turns the warm start off).
	WarmStart Duration `json:"warm_start"`
}

// Upstream configures the router's requests to pods: timeouts and the
// per-pod circuit breaker. A negative duration turns that timeout off.
type Upstream struct {
	// ResponseHeaderTimeout bounds the wait for a pod's response headers on
	// streams and passthrough requests, which vLLM answers before doing the
	// work (a non-streaming completion's headers come with its answer).
	ResponseHeaderTimeout Duration `json:"response_header_timeout"`
	// StreamIdleTimeout cuts a response that sends no byte for this long;
	// before its first byte reached the client the request is retried on
	// another pod.
	StreamIdleTimeout Duration `json:"stream_idle_timeout"`
	// RequestTimeout bounds a whole request, every attempt included.
	RequestTimeout Duration `json:"request_timeout"`
	// Breaker is the per-pod circuit breaker.
	Breaker Breaker `json:"breaker"`
}

// Breaker opens a pod's circuit after consecutive failures (refused
// connections at once), keeps it out of scoring for open_for, then lets one
// probe request through: success closes it, failure doubles open_for up to
// max_open_for.
type Breaker struct {
	// Failures in a row (timeouts, 5xx, broken responses) that open the
	// circuit; negative turns the breaker off.
	Failures   int      `json:"failures"`
	OpenFor    Duration `json:"open_for"`
	MaxOpenFor Duration `json:"max_open_for"`
}

// Tokenizer names the model's Hugging Face tokenizer files.
type Tokenizer struct {
	// JSON is tokenizer.json: a path, or an s3://bucket/key URI read with
	// the AWS SDK's default credentials and region (EKS Pod Identity, whose
	// role must allow s3:GetObject on the key).
	JSON string `json:"json,omitempty"`
	// Config is tokenizer_config.json (chat template, BOS/EOS rules), a path
	// or an s3://bucket/key URI like JSON; needed with JSON.
	Config string `json:"config,omitempty"`
	// CacheBytes bounds the cache of recently tokenized prompt text (the
	// rendered messages), so a prompt repeating a recent one's prefix is not
	// tokenized again; 0 turns it off, unset is DefaultTokenizerCacheBytes.
	CacheBytes *int64 `json:"cache_bytes,omitempty"`
}

// Discovery selects pods from Kubernetes or from a static list (exactly one).
type Discovery struct {
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
	Static     []StaticPod `json:"static,omitempty"`
	// Ports are where every discovered pod serves; static pods may override
	// them with full addresses.
	Ports Ports `json:"ports"`
	// Topic is the KV-event subscription prefix; "{ip}", "{port}" and
	// "{model}" are replaced per pod. vLLM publishes under the topic its
	// --kv-events-config names, llm-d's convention being the default.
	Topic string `json:"topic"`
	// DataParallelSize is every pod's vLLM --data-parallel-size (0 or 1:
	// none). Rank r of a pod publishes KV events and replays on the pod's
	// ports + r, as vLLM offsets them, keeps its own prefix cache, and is
	// chosen per request with vLLM's X-data-parallel-rank header.
	DataParallelSize int `json:"data_parallel_size,omitempty"`
	// KVEventsSilentAfter is how long a pod sent requests may publish no
	// KV events before the router reports it (metric, warning, /readyz).
	KVEventsSilentAfter Duration `json:"kv_events_silent_after"`
}

// Kubernetes watches pods by label selector in one namespace, or the pods
// of a Gateway API Inference Extension InferencePool there (exactly one).
type Kubernetes struct {
	Namespace string `json:"namespace"`
	// Selector is a label selector ("app=vllm,model=qwen").
	Selector string `json:"selector"`
	// InferencePool names an InferencePool (inference.networking.k8s.io/v1)
	// in Namespace: its spec.selector chooses the pods and each of its
	// spec.targetPorts is an endpoint of every pod, followed as the pool
	// changes.
	InferencePool string `json:"inference_pool,omitempty"`
}

// StaticPod is a fixed endpoint for local use. Addresses left empty are
// derived from IP and Discovery.Ports, except that a pod giving kv_events
// keeps its replay as given (empty: no replay).
type StaticPod struct {
	Name string `json:"name"`
	IP   string `json:"ip"`
	// HTTP is the base URL of the pod's OpenAI server and /metrics.
	HTTP string `json:"http,omitempty"`
	// KVEvents and Replay are ZeroMQ addresses ("tcp://host:port").
	KVEvents string `json:"kv_events,omitempty"`
	Replay   string `json:"replay,omitempty"`
}

// Ports are the pod-side ports vLLM is started with.
type Ports struct {
	HTTP     int `json:"http"`
	KVEvents int `json:"kv_events"`
	// Replay is vLLM's replay_endpoint port; 0 means the fleet runs without
	// replay, so a gap purges the pod instead of replaying.
	Replay int `json:"replay"`
}

// Metrics configures the /metrics scrapers.
type Metrics struct {
	// Interval between scrapes of one pod.
	Interval Duration `json:"interval"`
	// StaleAfter is the age past which a pod's scraped load is not trusted.
	StaleAfter Duration `json:"stale_after"`
	// Timeout bounds one scrape.
	Timeout Duration `json:"timeout"`
	// EjectAfterFailures is how many scrapes in a row may fail or time out
	// before the pod leaves scoring; its next good scrape brings it back.
	// Negative turns it off.
	EjectAfterFailures int `json:"eject_after_failures"`
	// FrozenAfter ejects a pod that reports requests running while its
	// vllm:generation_tokens_total and vllm:prompt_tokens_total stay flat
	// this long (a wedged engine whose /metrics still answers); the pod
	// returns once they move or it reports nothing running. Negative turns
	// it off.
	FrozenAfter Duration `json:"frozen_after"`
}

// Index bounds the block index (package index).
type Index struct {
	// MaxKeys bounds the number of block keys; 0 is unbounded.
	MaxKeys int `json:"max_keys,omitempty"`
	// SpeculationTTL is how long a routing decision counts as a cached prefix
	// on the chosen pod after the pod's first response byte, before its
	// BlockStored event confirms it. Until that byte the request waits at
	// the pod, and the decision counts whatever the time.
	SpeculationTTL Duration `json:"speculation_ttl"`
}

// Scoring is the weighted sum of scorers the picker maximises.
type Scoring struct {
	Scorers []Scorer `json:"scorers"`
}

// Scorer is one term of the sum.
type Scorer struct {
	// Type names the scorer (package scoring lists them).
	Type string `json:"type"`
	// Weight multiplies the scorer's [0, 1] score.
	Weight float64 `json:"weight"`
	// Params are the scorer's documented numeric parameters.
	Params map[string]float64 `json:"params,omitempty"`
}

// Load reads, defaults and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading router config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("router config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML (or JSON), rejecting unknown keys, fills defaults and
// validates.
func Parse(data []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	c.Default()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Marshal renders c as YAML, as the provider writes it.
func (c *Config) Marshal() ([]byte, error) {
	out, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encoding router config: %w", err)
	}
	return out, nil
}

// Duration is a time.Duration written as Go duration text ("50ms", "2s").
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads duration text.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"50ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// TopicFor expands the topic template for the publisher of the pod whose
// OpenAI server listens on ip:port.
func (d *Discovery) TopicFor(ip string, port int, model string) string {
	return strings.NewReplacer("{ip}", ip, "{port}", strconv.Itoa(port), "{model}", model).Replace(d.Topic)
}
