package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/tokenizer"
)

// LiveOptions configure live mode.
type LiveOptions struct {
	// TimeScale is simulated seconds per wall-clock second for the replicas.
	// Reported times are simulated seconds (wall x TimeScale), so they
	// compare with virtual mode's; the client's and router's own latency is
	// scaled up by the same factor.
	TimeScale float64
	// MaxLag fails a policy's run when a replica's largest lag behind its
	// schedule (llmd_sim_lag_max_seconds) exceeds this share of the run's
	// wall time: a starved CPU must not pass for a slow GPU.
	MaxLag float64
	// Router is the llmd-router binary whose serve command routes the
	// router policies; empty means this process's own executable.
	Router string
	// Model is the served model name.
	Model string
	// Tokenizer names the model's tokenizer files for the router: without
	// them it does not know the model and routes every request on load
	// alone, token-id prompts included.
	Tokenizer config.Tokenizer
	// APIKey, when set, goes with every request as a bearer token (a
	// router or engines that require one; never logged or reported).
	APIKey string
	// RouterArgs are added to every `llmd-router serve` the bench starts,
	// e.g. --max-in-flight-per-pod=32 (its admission).
	RouterArgs []string
	// SchedulingPolicy is the simulated replicas' vLLM --scheduling-policy
	// ("" is vLLM's default, fcfs); priority pairs with the router's
	// --engine-priority.
	SchedulingPolicy sim.SchedulingPolicy
	// LongPrefillTokenThreshold is the simulated replicas' vLLM
	// --long-prefill-token-threshold (0: vLLM's default, no cap).
	LongPrefillTokenThreshold int
}

// DefaultLiveOptions are real time, the 5% lag limit, this binary.
func DefaultLiveOptions() LiveOptions {
	return LiveOptions{TimeScale: 1, MaxLag: 0.05, Model: "Qwen/Qwen2.5-7B-Instruct"}
}

// RunLive runs each policy in turn against freshly started simulated
// replicas (cold caches, counters from zero): rr and random place requests
// from the client, as kube-proxy and a random pick would; approx, llmd
// and best go through a real `llmd-router serve` process configured with
// the policy's scorers. Progress goes to progress.
func RunLive(ctx context.Context, w Workload, policies []string, opts LiveOptions, progress io.Writer) (Report, error) {
	rep := Report{Mode: "live", Workload: w.Normalize(), Live: &LiveInfo{TimeScale: opts.TimeScale, RouterArgs: opts.RouterArgs,
		SchedulingPolicy: string(opts.SchedulingPolicy), LongPrefillTokenThreshold: opts.LongPrefillTokenThreshold}}
	if opts.TimeScale <= 0 {
		return rep, fmt.Errorf("time scale %g: must be > 0", opts.TimeScale)
	}
	if opts.Router == "" {
		exe, err := os.Executable()
		if err != nil {
			return rep, fmt.Errorf("finding this binary for the router: %w", err)
		}
		opts.Router = exe
	}
	prep, err := prepareLive(w, opts)
	if err != nil {
		return rep, err
	}
	dir, err := os.MkdirTemp("", "llmd-bench-")
	if err != nil {
		return rep, fmt.Errorf("creating a work directory: %w", err)
	}
	defer os.RemoveAll(dir)
	for _, p := range policies {
		start := time.Now()
		s, lag, err := runLivePolicy(ctx, w, prep, p, opts, dir, progress)
		if err != nil {
			return rep, fmt.Errorf("policy %s: %w", p, err)
		}
		wall := time.Since(start).Seconds()
		rep.Policies = append(rep.Policies, s)
		rep.Live.WallSeconds += wall
		rep.Live.MaxLagSeconds = max(rep.Live.MaxLagSeconds, lag.seconds)
		rep.Live.LagShare = max(rep.Live.LagShare, lag.share)
		if err := lag.check(opts); err != nil {
			return rep, fmt.Errorf("policy %s: %w", p, err)
		}
	}
	// Multi-turn has no virtual form (its turns carry live replies): it
	// runs without a ceiling.
	_, derr := w.SimDataset()
	if derr == nil && slices.ContainsFunc(policies, routed) {
		c, err := RoutingCeiling(w, opts.TimeScale)
		if err != nil {
			return rep, err
		}
		rep.Ceiling = &c
	}
	return rep, nil
}

// lagReport is a run's worst replica lag.
type lagReport struct{ seconds, share, wall float64 }

// check fails a run whose worst lag exceeds the limit.
func (l lagReport) check(opts LiveOptions) error {
	if l.share <= opts.MaxLag {
		return nil
	}
	return fmt.Errorf("a replica lagged its schedule by %.1f s, %.1f%% of the %.0f s run (limit %.0f%%): "+
		"the CPU could not keep up at time scale %g, so the figures would not be the model's",
		l.seconds, 100*l.share, l.wall, 100*opts.MaxLag, opts.TimeScale)
}

// livePrep is what every policy's run shares: the model's chat renderer
// and tokenizer (for text prompts, nil without tokenizer files) and the
// built prompts.
type livePrep struct {
	model *chat.Model
	text  *textWorkload // text completions
	work  sim.Workload  // token-id completions
}

// prepareLive loads the tokenizer and builds the prompts before any clock
// starts.
func prepareLive(w Workload, opts LiveOptions) (*livePrep, error) {
	if err := w.check(); err != nil {
		return nil, err
	}
	model, err := loadLiveModel(opts)
	if err != nil {
		return nil, err
	}
	return buildLivePrompts(w, model)
}

// loadLiveModel loads the model's tokenizer files, nil without them.
func loadLiveModel(opts LiveOptions) (*chat.Model, error) {
	if opts.Tokenizer.JSON == "" {
		return nil, nil
	}
	if opts.Tokenizer.Config == "" {
		return nil, fmt.Errorf("--tokenizer needs --tokenizer-config (the chat template and special tokens)")
	}
	model, err := chat.LoadModel(opts.Tokenizer.JSON, opts.Tokenizer.Config, chat.Options{})
	if err != nil {
		return nil, fmt.Errorf("loading the model's tokenizer files: %w", err)
	}
	return model, nil
}

// buildLivePrompts builds w's prompts with model's tokenizer (nil: token
// ids only).
func buildLivePrompts(w Workload, model *chat.Model) (*livePrep, error) {
	prep := &livePrep{model: model}
	var tok *tokenizer.Tokenizer
	if model != nil {
		tok = model.Tokenizer()
	}
	switch {
	case w.Dataset == DatasetMultiTurn:
		if tok == nil {
			return nil, fmt.Errorf("the %s workload sends chat messages: it needs --tokenizer and --tokenizer-config", w.Dataset)
		}
	case w.Prompts == PromptsText:
		var err error
		if prep.text, err = buildTextWorkload(w, tok); err != nil {
			return nil, err
		}
	default:
		ds, err := w.SimDataset()
		if err != nil {
			return nil, err
		}
		if prep.work, err = ds.Build(); err != nil {
			return nil, err
		}
	}
	return prep, nil
}

// prompts is the prompt token ids of a completions workload, in the order
// they are sent.
func (p *livePrep) prompts() sim.Workload {
	if p.text != nil {
		return p.text
	}
	return p.work
}

// requests returns a fresh request source for one policy's run.
func (p *livePrep) requests(w Workload, timeScale float64) (requests, error) {
	switch {
	case w.Dataset == DatasetMultiTurn:
		c, err := buildConversations(w, p.model.Tokenizer())
		if err != nil {
			return nil, err
		}
		c.arrivals, c.seed = arrivalOffsets(w, w.NumPrefixes, timeScale), w.Seed
		return c, nil
	case p.text != nil:
		return &completions{work: p.text, text: p.text.Text, arrivals: arrivalOffsets(w, p.text.Len(), timeScale)}, nil
	}
	return &completions{work: p.work, arrivals: arrivalOffsets(w, p.work.Len(), timeScale)}, nil
}

// runLivePolicy runs one policy on a fresh fleet.
func runLivePolicy(ctx context.Context, w Workload, prep *livePrep, policy string, opts LiveOptions, dir string,
	progress io.Writer) (Summary, lagReport, error) {
	ec := w.engineConfig()
	ec.Policy, ec.LongPrefillTokenThreshold = opts.SchedulingPolicy, opts.LongPrefillTokenThreshold
	fleet, err := sim.StartFleet(sim.FleetConfig{Replica: sim.ReplicaConfig{Model: opts.Model, Engine: ec,
		TimeScale: opts.TimeScale, Form: kvevents.FormMap, BufferSteps: 10000, Chat: prep.model}, Replicas: w.Replicas,
		Host: "127.0.0.1"})
	if err != nil {
		return Summary{}, lagReport{}, fmt.Errorf("starting %d simulated replicas: %w", w.Replicas, err)
	}
	stopFleet := fleet.Start(ctx)
	defer stopFleet()
	bases := make([]string, len(fleet.Infos))
	for i, info := range fleet.Infos {
		bases[i] = info.HTTP
	}
	target, rps, err := liveTarget(ctx, policy, w, bases, fleet.Infos, opts, dir)
	if err != nil {
		return Summary{}, lagReport{}, err
	}
	defer stopRouters(rps)
	reqs, err := prep.requests(w, opts.TimeScale)
	if err != nil {
		return Summary{}, lagReport{}, err
	}
	side := liveSide{policy: policy, target: target, engines: bases}
	for _, rp := range rps {
		side.routers = append(side.routers, rp.addr)
	}
	side.alive = func() error {
		for _, rp := range rps {
			if err := rp.alive(); err != nil {
				return err
			}
		}
		return nil
	}
	return measureLive(ctx, w, reqs, side, opts, progress)
}

// liveTarget says where each request goes: rr pins each connection to a
// random pod (kube-proxy), random draws a pod per request, router policies
// send everything to the router processes started for the policy, each
// connection pinned to one of them at random, as their Service's
// kube-proxy pins it.
func liveTarget(ctx context.Context, policy string, w Workload, bases []string, infos []sim.ReplicaInfo, opts LiveOptions,
	dir string) (func(conn, i int) string, []*routerProc, error) {
	if target := clientPlaced(policy, w, bases); target != nil {
		return target, nil, nil
	}
	scorers, _, ok := RouterScorers(policy)
	if !ok {
		return nil, nil, fmt.Errorf("unknown policy %q", policy)
	}
	var rps []*routerProc
	peers, err := livePeers(policy)
	if err != nil {
		return nil, nil, err
	}
	for i := range Routers(policy) {
		rp, err := startRouter(ctx, opts, dir, policy, scorers, w.BlockSize, infos, peerConfig(peers, i))
		if err == nil {
			rps = append(rps, rp)
			err = waitReady(ctx, rp)
		}
		if err != nil {
			stopRouters(rps)
			if strings.Contains(err.Error(), "not implemented yet") {
				return nil, nil, fmt.Errorf("%w (%s)", errRouterMissing, opts.Router)
			}
			return nil, nil, err
		}
	}
	addrs := make([]string, len(rps))
	for i, rp := range rps {
		addrs[i] = rp.addr
	}
	if len(peers) > 0 {
		if err := waitPeers(ctx, rps); err != nil {
			stopRouters(rps)
			return nil, nil, err
		}
	}
	return serviceSpread(w, addrs), rps, nil
}

// clientPlaced is the target of the policies the client places itself:
// rr pins each connection to a random pod, as kube-proxy pins a Service's
// connection; random draws a pod per request. Nil for any other policy.
func clientPlaced(policy string, w Workload, bases []string) func(conn, i int) string {
	switch policy {
	case PolicyRR:
		rng := rand.New(rand.NewPCG(w.Seed, 0x6b707278))
		pinned := make([]string, w.MaxConcurrency)
		for c := range pinned {
			pinned[c] = bases[rng.IntN(len(bases))]
		}
		return func(conn, _ int) string { return pinned[conn] }
	case PolicyRandom:
		return func(_, i int) string {
			return bases[rand.New(rand.NewPCG(w.Seed, uint64(i))).IntN(len(bases))]
		}
	}
	return nil
}

// serviceSpread pins each connection to one of the router replicas at
// random, as their Service's kube-proxy pins it.
func serviceSpread(w Workload, routers []string) func(conn, i int) string {
	rng := rand.New(rand.NewPCG(w.Seed, 0x73766370))
	pinned := make([]string, w.MaxConcurrency)
	for c := range pinned {
		pinned[c] = routers[rng.IntN(len(routers))]
	}
	return func(conn, _ int) string { return pinned[conn] }
}

// stopRouters stops every router process started.
func stopRouters(rps []*routerProc) {
	for _, rp := range rps {
		rp.stop()
	}
}

// waitReady polls the router's /readyz until it answers 200: it has
// discovered the pods, scraped them and subscribed to their KV events.
func waitReady(ctx context.Context, rp *routerProc) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rp.addr+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := rp.alive(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("router at %s not ready after 60 s: %s", rp.addr, rp.logs.String()), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitPeers polls every replica's llmd_router_peers until each follows all
// the others. A replica shares a decision only with the peers following it
// (router/peers), and /readyz rightly does not wait for peers (a replica
// serves alone when they are gone); a run measures replicas that have
// found each other, as long-running ones have, so the opening burst of
// decisions is shared too.
func waitPeers(ctx context.Context, rps []*routerProc) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	want := float64(len(rps) - 1)
	for {
		var short []string
		for _, rp := range rps {
			followed := -1.0
			err := getMetrics(ctx, hc, rp.addr, func(r io.Reader) error {
				return eachSample(r, func(name, _ string, v float64) {
					if name == "llmd_router_peers" {
						followed = v
					}
				})
			})
			if err != nil || followed != want {
				short = append(short, fmt.Sprintf("%s follows %v (err %v)", rp.addr, followed, err))
			}
			if err := rp.alive(); err != nil {
				return err
			}
		}
		if len(short) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("router replicas not following their %v peers after 30 s: %s", want, strings.Join(short, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// DemoTimeScale is the replicas' speed-up in `make demo`.
const DemoTimeScale = 2.5

// DemoWorkload scales a workload for `make demo` (see doc.go, "make demo").
func DemoWorkload(w Workload) Workload {
	w.NumPrompts = w.NumPrompts / 5
	return w
}
