package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// Picker chooses the pod for each request, as a router in front of the
// fleet does. It sees only what a router can know (View): the scraped load
// of each pod, its own in-flight counts, and an index fed by encoded KV
// events delivered after a delay. It never sees an Engine.
type Picker interface {
	// Pick returns the index into v.Pods of the pod that serves r.
	Pick(r *Route, v *View) int
}

// Route is one request as the router receives it.
type Route struct {
	// Conn is the client connection the request came on (kube-proxy
	// balances connections, not requests).
	Conn int
	// Tokens is the prompt's token ids, as the router's tokenizer produces them.
	Tokens []uint32
	// Uncached is what a picker may set: the prompt tokens the chosen pod
	// holds no block of, as the router estimated them. The run counts them
	// in the pod's PendingTokens until the request's first token.
	Uncached int
	// Hold is what a picker may set: the speculative index entries it wrote
	// for the request. The run settles it at the request's first token, as
	// the live router does at its first response byte.
	Hold *index.Hold
}

// View is the router's knowledge of the fleet when a request arrives.
type View struct {
	// Now is the time in seconds since the run started.
	Now float64
	// Pods names the pods; a pick is an index into it. The index knows
	// each pod as index.Engine{Pod: Pods[i]}.
	Pods []string
	// Load is each pod's last scraped metrics plus the router's own count.
	Load []PodLoad
	// Index holds only what decoded KV events reported.
	Index *index.Index
	// BlockSize is the fleet's configured block size, for index.Keys.
	BlockSize int
}

// PodLoad is one pod's load as a router sees it.
type PodLoad struct {
	// Running, Waiting and KVUsage are vllm:num_requests_running,
	// vllm:num_requests_waiting and vllm:kv_cache_usage_perc at ScrapedAt.
	Running, Waiting int
	KVUsage          float64
	ScrapedAt        float64
	// InFlight counts requests the router sent to the pod and has not yet
	// seen finish: fresh where scrapes are stale. PendingTokens sums the
	// Route.Uncached of those without a first token yet, as the live
	// router counts its requests' prefill until their first byte.
	InFlight      int
	PendingTokens int
}

// RoundRobin sends requests to pods in turn.
type RoundRobin struct{ next int }

// Pick implements Picker.
func (p *RoundRobin) Pick(_ *Route, v *View) int {
	i := p.next % len(v.Pods)
	p.next = i + 1
	return i
}

// Random sends each request to a uniformly random pod.
type Random struct{ rng *rand.Rand }

// NewRandom returns a Random picker with a seeded stream.
func NewRandom(seed uint64) *Random { return &Random{rng: rand.New(rand.NewPCG(seed, 0x72616e64))} }

// Pick implements Picker.
func (p *Random) Pick(_ *Route, v *View) int { return p.rng.IntN(len(v.Pods)) }

// KubeProxy is the Kubernetes baseline: a Service's kube-proxy picks a
// random pod for each new connection, and a keep-alive connection sends all
// its requests there.
type KubeProxy struct {
	rng  *rand.Rand
	pods map[int]int
}

// NewKubeProxy returns a KubeProxy picker with a seeded stream.
func NewKubeProxy(seed uint64) *KubeProxy {
	return &KubeProxy{rng: rand.New(rand.NewPCG(seed, 0x6b707278)), pods: make(map[int]int)}
}

// Pick implements Picker.
func (p *KubeProxy) Pick(r *Route, v *View) int {
	pod, ok := p.pods[r.Conn]
	if !ok {
		pod = p.rng.IntN(len(v.Pods))
		p.pods[r.Conn] = pod
	}
	return pod
}

// NewPicker returns a built-in picker by name: kube-proxy, round-robin or random.
func NewPicker(name string, seed uint64) (Picker, error) {
	switch name {
	case "kube-proxy":
		return NewKubeProxy(seed), nil
	case "round-robin":
		return &RoundRobin{}, nil
	case "random":
		return NewRandom(seed), nil
	}
	return nil, fmt.Errorf("unknown picker %q (want kube-proxy, round-robin or random)", name)
}
