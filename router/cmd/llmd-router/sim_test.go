package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents/zmqtransport"
)

// startSim runs `llmd-router sim` with args and returns the replicas it announces.
func startSim(t *testing.T, args ...string) []sim.ReplicaInfo {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := run(ctx, append([]string{"sim"}, args...), pw, &stderr)
		pw.Close()
		done <- code
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("sim exited %d: %s", code, stderr.String())
		}
	})
	var infos []sim.ReplicaInfo
	dec := json.NewDecoder(pr)
	for range 8 {
		var info sim.ReplicaInfo
		if err := dec.Decode(&info); err != nil {
			t.Fatalf("reading replica %d: %v (stderr %s)", len(infos), err, stderr.String())
		}
		infos = append(infos, info)
	}
	go io.Copy(io.Discard, pr)
	return infos
}

// benchResult is what a `vllm bench serve`-shaped client records per request.
type benchResult struct {
	ttft       time.Duration
	chunks     int
	usage      int
	pod        int
	tokensSeen string
}

// TestSimServesBenchShapedClient runs `llmd-router sim --replicas 8` and
// drives it as `vllm bench serve --dataset-name prefix_repetition
// --ignore-eos` does: keep-alive connections each pinned to a random pod
// (the kube-proxy baseline), streamed completions of token-id prompts with
// usage. It checks every stream, the fleet's /metrics totals, and that the
// router's ingestion learns every shared prefix from the KV events.
func TestSimServesBenchShapedClient(t *testing.T) {
	infos := startSim(t, "--replicas", "8", "--port", "0", "--kv-port", "0", "--time-scale", "20")
	ix := index.New(index.Config{})
	in, err := kvevents.New(kvevents.Config{Index: ix, Transport: &zmqtransport.Transport{}, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for _, info := range infos {
		if err := in.Add(kvevents.Endpoint{Pod: info.Pod, Addr: info.KV, ReplayAddr: info.Replay, Topic: info.Topic}); err != nil {
			t.Fatal(err)
		}
	}

	const prefixes, prefixLen, suffixLen, outputLen, prompts, conns = 4, 256, 32, 32, 64, 16
	rng := rand.New(rand.NewPCG(1, 2))
	prefix := make([][]uint32, prefixes)
	for i := range prefix {
		prefix[i] = randomIDs(rng, prefixLen)
	}
	work := make(chan []uint32, prompts)
	for i := range prompts {
		work <- append(append([]uint32(nil), prefix[i%prefixes]...), randomIDs(rng, suffixLen)...)
	}
	close(work)

	results := make(chan benchResult, prompts)
	var wg sync.WaitGroup
	for c := range conns {
		pod := rng.IntN(len(infos))
		client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				r, err := streamCompletion(client, infos[pod].HTTP, p, outputLen)
				if err != nil {
					t.Errorf("connection %d: %v", c, err)
					return
				}
				r.pod = pod
				results <- r
			}
		}()
	}
	wg.Wait()
	close(results)
	n := 0
	for r := range results {
		n++
		if r.chunks != outputLen || r.usage != outputLen || len(r.tokensSeen) != outputLen || r.ttft <= 0 {
			t.Fatalf("request on pod %d: %d chunks, usage %d, text %q, ttft %v", r.pod, r.chunks, r.usage, r.tokensSeen, r.ttft)
		}
	}
	if n != prompts {
		t.Fatalf("%d of %d requests completed", n, prompts)
	}

	var gen, success, queries, hits float64
	for _, info := range infos {
		fams := scrapeMetrics(t, info.HTTP)
		gen += fams["vllm:generation_tokens_total"]
		success += fams["vllm:request_success_total"]
		queries += fams["vllm:prefix_cache_queries_total"]
		hits += fams["vllm:prefix_cache_hits_total"]
	}
	if gen != prompts*outputLen || success != prompts || queries != prompts*(prefixLen+suffixLen) {
		t.Fatalf("fleet metrics: generation %v, success %v, queries %v", gen, success, queries)
	}
	if hits < float64(prompts-conns)*prefixLen/2 {
		t.Fatalf("fleet prefix hits %v: repeated prefixes on pinned connections should hit", hits)
	}
	for i, p := range prefix {
		keys := index.Keys(nil, p, 16, "", nil)
		deadline := time.Now().Add(5 * time.Second)
		for {
			best := 0
			for _, m := range ix.Lookup(keys, nil) {
				best = max(best, m.Blocks)
			}
			if best == prefixLen/16 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("prefix %d: router index holds %d of %d blocks", i, best, prefixLen/16)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func randomIDs(rng *rand.Rand, n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(rng.IntN(151643))
	}
	return s
}

func streamCompletion(client *http.Client, base string, prompt []uint32, outputLen int) (benchResult, error) {
	body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen2.5-7B-Instruct", "prompt": prompt, "max_tokens": outputLen,
		"ignore_eos": true, "stream": true, "stream_options": map[string]any{"include_usage": true}})
	start := time.Now()
	resp, err := client.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return benchResult{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return benchResult{}, fmt.Errorf("status %d", resp.StatusCode)
	}
	var r benchResult
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return r, nil
		}
		var c struct {
			Choices []struct{ Text string } `json:"choices"`
			Usage   *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return r, err
		}
		if c.Usage != nil {
			r.usage = c.Usage.CompletionTokens
		}
		if len(c.Choices) > 0 && c.Choices[0].Text != "" {
			if r.chunks == 0 {
				r.ttft = time.Since(start)
			}
			r.chunks++
			r.tokensSeen += c.Choices[0].Text
		}
	}
	return r, fmt.Errorf("stream ended without [DONE]: %v", sc.Err())
}

func scrapeMetrics(t *testing.T, base string) map[string]float64 {
	t.Helper()
	fams := testenv.ScrapeMetrics(t, base)
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			out[name] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}

// TestSimVirtualCommand runs a small workload in virtual mode through the
// command line and checks the summary it prints.
func TestSimVirtualCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"sim", "--virtual", "--replicas", "2", "--picker", "round-robin", "--num-prompts", "40",
		"--prefix-repetition-num-prefixes", "4", "--prefix-repetition-prefix-len", "128",
		"--prefix-repetition-suffix-len", "16", "--prefix-repetition-output-len", "8", "--max-concurrency", "8"}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res sim.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("summary %q: %v", stdout.String(), err)
	}
	if res.Requests != 40 || res.OutputTokens != 320 || res.PodRequests[0] != 20 || res.PodRequests[1] != 20 || res.HitRate <= 0 {
		t.Fatalf("summary %+v", res)
	}
}
