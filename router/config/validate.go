package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Validate reports every problem at once, each naming its key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.Model == "" {
		bad("model", "must be set")
	}
	if (c.Tokenizer.JSON == "") != (c.Tokenizer.Config == "") {
		bad("tokenizer", "set both json and config, or neither")
	}
	for _, f := range []struct{ key, value, file string }{{"tokenizer.json", c.Tokenizer.JSON, "tokenizer.json"},
		{"tokenizer.config", c.Tokenizer.Config, "tokenizer_config.json"}} {
		if !validS3URI(f.value) {
			bad(f.key, "%q lacks a bucket or a key: write s3://bucket/key, e.g. s3://models/qwen3/<revision>/%s", f.value, f.file)
		}
	}
	if n := c.Tokenizer.CacheBytes; n != nil && *n < 0 {
		bad("tokenizer.cache_bytes", "must be >= 0 (0 turns the cache off), got %d", *n)
	}
	adapters := map[string]int{}
	for i, a := range c.LoRAAdapters {
		key := fmt.Sprintf("lora_adapters[%d]", i)
		if j, dup := adapters[a]; dup {
			bad(key, "%q is already lora_adapters[%d]", a, j)
		}
		if a == "" || a == c.Model {
			bad(key, "must be a non-empty name other than model, got %q", a)
		}
		adapters[a] = i
	}
	if c.BlockSize < 0 {
		bad("block_size", "must be >= 0 (0 learns it from KV events), got %d", c.BlockSize)
	}
	c.Discovery.validate(bad)
	c.Peers.validate(bad)
	if c.Autoscaling != nil {
		c.Autoscaling.validate(c.Discovery.Kubernetes, bad)
	}
	for _, d := range []struct {
		key string
		d   Duration
	}{{"discovery.kv_events_silent_after", c.Discovery.KVEventsSilentAfter}, {"metrics.interval", c.Metrics.Interval}, {"metrics.stale_after", c.Metrics.StaleAfter},
		{"metrics.timeout", c.Metrics.Timeout}, {"index.speculation_ttl", c.Index.SpeculationTTL}} {
		if d.d.Duration <= 0 {
			bad(d.key, "must be positive, got %s", d.d)
		}
	}
	if c.Metrics.StaleAfter.Duration < c.Metrics.Interval.Duration {
		bad("metrics.stale_after", "must be at least metrics.interval (%s), got %s", c.Metrics.Interval, c.Metrics.StaleAfter)
	}
	if f := c.Metrics.FrozenAfter.Duration; f > 0 && f < c.Metrics.Interval.Duration {
		bad("metrics.frozen_after", "must be at least metrics.interval (%s) or negative (off), got %s", c.Metrics.Interval, c.Metrics.FrozenAfter)
	}
	if b := c.Upstream.Breaker; b.Failures > 0 {
		if b.OpenFor.Duration <= 0 {
			bad("upstream.breaker.open_for", "must be positive, got %s", b.OpenFor)
		}
		if b.MaxOpenFor.Duration < b.OpenFor.Duration {
			bad("upstream.breaker.max_open_for", "must be at least upstream.breaker.open_for (%s), got %s", b.OpenFor, b.MaxOpenFor)
		}
	}
	if c.Index.MaxKeys < 0 {
		bad("index.max_keys", "must be >= 0, got %d", c.Index.MaxKeys)
	}
	seen := map[string]int{}
	for i, s := range c.Scoring.Scorers {
		key := fmt.Sprintf("scoring.scorers[%d]", i)
		if s.Type == "" {
			bad(key+".type", "must be set")
		} else if j, dup := seen[s.Type]; dup {
			bad(key+".type", "%q is already scorers[%d]", s.Type, j)
		}
		seen[s.Type] = i
		if s.Weight < 0 {
			bad(key+".weight", "must be >= 0, got %g", s.Weight)
		}
	}
	return errors.Join(errs...)
}

func (a *Autoscaling) validate(k *Kubernetes, bad func(key, format string, args ...any)) {
	if a.MetricsListen == "" && a.Deployment == "" {
		if a.ScaleToZeroAfter.Duration != 0 {
			bad("autoscaling.scale_to_zero_after", "needs autoscaling.deployment, the Deployment to scale")
		}
		return
	}
	if k == nil || k.InferencePool != "" || strings.TrimSpace(k.Selector) == "" {
		bad("autoscaling", "needs discovery.kubernetes with a selector: the fleet's pods, whose demand the router reports and whose Deployment it scales")
	}
	if a.MetricsListen != "" {
		if _, port, err := net.SplitHostPort(a.MetricsListen); err != nil || port == "" {
			bad("autoscaling.metrics_listen", "must be host:port or :port, got %q", a.MetricsListen)
		}
	}
	if a.ScaleToZeroAfter.Duration < 0 {
		bad("autoscaling.scale_to_zero_after", "must be >= 0 (0: never), got %s", a.ScaleToZeroAfter)
	}
	if a.ScaleToZeroAfter.Duration > 0 && a.Deployment == "" {
		bad("autoscaling.scale_to_zero_after", "needs autoscaling.deployment, the Deployment to scale")
	}
}

func (p *Peers) validate(bad func(key, format string, args ...any)) {
	if p.Listen == "" {
		if p.Kubernetes != nil || len(p.Static) > 0 {
			bad("peers.listen", "must be set with peers.kubernetes or peers.static (\":9092\"): peers reach each other on its port")
		}
		return
	}
	if _, port, err := net.SplitHostPort(p.Listen); err != nil || port == "" {
		bad("peers.listen", "must be host:port or :port, got %q", p.Listen)
	}
	if p.Kubernetes != nil && len(p.Static) > 0 {
		bad("peers", "set kubernetes or static, not both")
	}
	if k := p.Kubernetes; k != nil {
		if k.Namespace == "" {
			bad("peers.kubernetes.namespace", "must be set")
		}
		if k.InferencePool != "" {
			bad("peers.kubernetes.inference_pool", "is not allowed: peers are the router's own pods, chosen by selector")
		}
		if strings.TrimSpace(k.Selector) == "" {
			bad("peers.kubernetes.selector", "must be set: the router Deployment's pod labels")
		}
	}
	for i, a := range p.Static {
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
			bad(fmt.Sprintf("peers.static[%d]", i), "must be host:port, got %q", a)
		}
	}
}

func (d *Discovery) validate(bad func(key, format string, args ...any)) {
	if d.DataParallelSize < 0 || d.DataParallelSize > MaxDataParallelSize {
		bad("discovery.data_parallel_size", "must be 0 to %d (vLLM's --data-parallel-size; 0 or 1 for none), got %d",
			MaxDataParallelSize, d.DataParallelSize)
	}
	if engines := len(d.Static) * max(d.DataParallelSize, 1); engines > MaxEngines {
		bad("discovery.static", "%d pods x %d data-parallel ranks = %d engines, more than the block index tracks (%d): split the fleet across routers",
			len(d.Static), max(d.DataParallelSize, 1), engines, MaxEngines)
	}
	switch {
	case d.Kubernetes == nil && len(d.Static) == 0:
		bad("discovery", "set kubernetes or static")
	case d.Kubernetes != nil && len(d.Static) > 0:
		bad("discovery", "set kubernetes or static, not both")
	}
	if k := d.Kubernetes; k != nil {
		if k.Namespace == "" {
			bad("discovery.kubernetes.namespace", "must be set")
		}
		switch {
		case k.InferencePool != "" && strings.TrimSpace(k.Selector) != "":
			bad("discovery.kubernetes.inference_pool", "set selector or inference_pool, not both: the pool's own selector chooses its pods")
		case k.InferencePool == "" && strings.TrimSpace(k.Selector) == "":
			bad("discovery.kubernetes.selector", "must be set (or inference_pool): an empty selector would route to every pod in the namespace")
		}
	}
	names := map[string]bool{}
	for i, p := range d.Static {
		key := fmt.Sprintf("discovery.static[%d]", i)
		if p.Name == "" {
			bad(key+".name", "must be set")
		} else if names[p.Name] {
			bad(key+".name", "%q is listed twice", p.Name)
		}
		names[p.Name] = true
		if p.IP == "" && (p.HTTP == "" || p.KVEvents == "") {
			bad(key+".ip", "must be set unless http and kv_events are")
		}
		if p.HTTP != "" {
			if u, err := url.Parse(p.HTTP); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(key+".http", "must be an http(s) URL, got %q", p.HTTP)
			}
		}
		if p.KVEvents != "" && !strings.HasPrefix(p.KVEvents, "tcp://") {
			bad(key+".kv_events", "must be a tcp:// address, got %q", p.KVEvents)
		}
		if p.Replay != "" && !strings.HasPrefix(p.Replay, "tcp://") {
			bad(key+".replay", "must be a tcp:// address, got %q", p.Replay)
		}
	}
	if d.Ports.HTTP < 1 || d.Ports.HTTP > 65535 {
		bad("discovery.ports.http", "must be a port 1-65535, got %d", d.Ports.HTTP)
	}
	if d.Ports.KVEvents < 1 || d.Ports.KVEvents > 65535 {
		bad("discovery.ports.kv_events", "must be a port 1-65535, got %d", d.Ports.KVEvents)
	}
	if d.Ports.Replay < 0 || d.Ports.Replay > 65535 {
		bad("discovery.ports.replay", "must be a port 1-65535, or 0 for no replay, got %d", d.Ports.Replay)
	}
}

// validS3URI reports whether v, if it is an s3:// URI, names a bucket and a
// key. Paths pass.
func validS3URI(v string) bool {
	bucket, key, isS3 := SplitS3URI(v)
	return !isS3 || (bucket != "" && key != "")
}

// SplitS3URI splits an s3://bucket/key URI (isS3 false for anything else,
// a local path). The key is taken literally, as the AWS CLI takes it;
// bucket or key is empty when the URI lacks it.
func SplitS3URI(v string) (bucket, key string, isS3 bool) {
	rest, ok := strings.CutPrefix(v, "s3://")
	if !ok {
		return "", "", false
	}
	bucket, key, _ = strings.Cut(rest, "/")
	return bucket, key, true
}
