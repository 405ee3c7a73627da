package discovery

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// Scraped is one pod's load as its vLLM /metrics reported it.
type Scraped struct {
	Running, Waiting int
	// KVUsage is 0..1.
	KVUsage float64
	// Tokens is vllm:generation_tokens_total plus vllm:prompt_tokens_total,
	// the engine's progress; HasTokens says the page had either counter.
	Tokens    float64
	HasTokens bool
	// KVCacheTokens is the KV cache's size in tokens, num_gpu_blocks times
	// block_size of vllm:cache_config_info, summed over the pod's engines;
	// 0 when the page does not state it.
	KVCacheTokens int
	// Preemptions is vllm:num_preemptions_total, summed over the pod's
	// engines; HasPreemptions says the page had it.
	Preemptions    float64
	HasPreemptions bool
}

// vLLM metric names (PROTOCOLS.md section 3). kv_cache_usage_perc replaced
// gpu_cache_usage_perc; a pod mid-upgrade may send either.
const (
	metricRunning    = "vllm:num_requests_running"
	metricWaiting    = "vllm:num_requests_waiting"
	metricKVUsage    = "vllm:kv_cache_usage_perc"
	metricKVUsageOld = "vllm:gpu_cache_usage_perc"
	// The progress counters (vllm/v1/metrics/loggers.py registers both;
	// PROTOCOLS.md section 3): optional, a pod without them is never judged
	// frozen.
	metricGenTokens    = "vllm:generation_tokens_total"
	metricPromptTokens = "vllm:prompt_tokens_total"
	// The cache's size, as labels of an info gauge
	// (vllm/v1/metrics/loggers.py, CacheConfig.metrics_info()); optional.
	metricCacheConfig = "vllm:cache_config_info"
	// Requests the engine took back from the running batch because the KV
	// cache had no block for their next tokens (vllm/v1/metrics/loggers.py,
	// counted by the scheduler's _preempt_request); optional.
	metricPreemptions = "vllm:num_preemptions_total"
)

// ParseMetrics reads the three load gauges, and the progress counters, the
// preemption counter and the KV cache's size when present, from Prometheus
// text. A pod with several engines (data parallelism) exposes one series
// per engine: counts are summed and KV usage is the fullest engine's, since
// one full engine already evicts. Only the lines of interest are parsed,
// which keeps a 50 ms scrape of a large /metrics page cheap. All three
// gauges must be present.
func ParseMetrics(r io.Reader) (Scraped, error) {
	var s Scraped
	var seen [3]bool
	buf := lineBuffers.Get().(*[]byte)
	defer lineBuffers.Put(buf)
	sc := bufio.NewScanner(r)
	sc.Buffer(*buf, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' || !bytes.HasPrefix(line, []byte("vllm:")) {
			continue
		}
		name, value, err := sample(line)
		if err != nil {
			return s, err
		}
		switch string(name) { // compared in place, no string is made
		case metricRunning:
			s.Running += int(value)
			seen[0] = true
		case metricWaiting:
			s.Waiting += int(value)
			seen[1] = true
		case metricKVUsage, metricKVUsageOld:
			s.KVUsage = max(s.KVUsage, value)
			seen[2] = true
		case metricGenTokens, metricPromptTokens:
			s.Tokens += value
			s.HasTokens = true
		case metricPreemptions:
			s.Preemptions += value
			s.HasPreemptions = true
		case metricCacheConfig:
			blocks, size := labelInt(line, "num_gpu_blocks"), labelInt(line, "block_size")
			s.KVCacheTokens += blocks * size
		}
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("reading metrics: %w", err)
	}
	for i, name := range []string{metricRunning, metricWaiting, metricKVUsage} {
		if !seen[i] {
			return s, fmt.Errorf("metrics lack %s", name)
		}
	}
	return s, nil
}

// lineBuffers hold the scanner's line buffer between scrapes: a router
// scrapes every pod 20 times a second, and a fresh 64 KB buffer each time was
// most of its garbage.
var lineBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 64<<10)
	return &b
}}

// labelInt is the value of label name on an exposition line when it is a
// positive integer below 2^31, else 0 (absent, "None", anything else).
func labelInt(line []byte, name string) int {
	end := bytes.IndexByte(line, '}')
	if end < 0 {
		return 0
	}
	labels := line[:end]
	for i := 0; ; {
		j := bytes.Index(labels[i:], []byte(name+`="`))
		if j < 0 {
			return 0
		}
		j += i
		if c := labels[j-1]; c == '{' || c == ',' || c == ' ' {
			v := labels[j+len(name)+2:]
			if k := bytes.IndexByte(v, '"'); k >= 0 {
				if n, err := strconv.Atoi(string(v[:k])); err == nil && n > 0 && n < 1<<31 {
					return n
				}
			}
			return 0
		}
		i = j + 1
	}
}

// sample splits one exposition line into its metric name and value,
// skipping the label set (whose quoted values may hold spaces, braces and
// escaped quotes) and an optional timestamp.
func sample(line []byte) ([]byte, float64, error) {
	i := bytes.IndexAny(line, "{ ")
	if i < 0 {
		return nil, 0, fmt.Errorf("metrics line %q has no value", line)
	}
	name, rest := line[:i], line[i:]
	if rest[0] == '{' {
		quoted, j := false, 1
		for ; j < len(rest) && (quoted || rest[j] != '}'); j++ {
			switch {
			case rest[j] == '\\' && quoted:
				j++
			case rest[j] == '"':
				quoted = !quoted
			}
		}
		if j >= len(rest) {
			return nil, 0, fmt.Errorf("metrics line %q: unterminated labels", line)
		}
		rest = rest[j+1:]
	}
	value, _, _ := bytes.Cut(bytes.TrimLeft(rest, " \t"), []byte(" "))
	if len(value) == 0 {
		return nil, 0, fmt.Errorf("metrics line %q has no value", line)
	}
	v, err := strconv.ParseFloat(string(value), 64)
	if err != nil {
		return nil, 0, fmt.Errorf("metrics line %q: %w", line, err)
	}
	return name, v, nil
}
