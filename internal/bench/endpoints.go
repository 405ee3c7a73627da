package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"
)

// PolicyRouter is, against given endpoints, the router replicas given:
// their configuration is whatever they were deployed with.
const PolicyRouter = "router"

// EndpointPolicies are the policies a run against given endpoints knows:
// the two the client places itself, and the given routers.
var EndpointPolicies = []string{PolicyRR, PolicyRandom, PolicyRouter}

// Endpoints are a fleet the bench did not start: vLLM engines (or
// simulated replicas) and the routers in front of them, by base URL
// ("http://10.0.1.5:8000").
type Endpoints struct {
	// Engines serve the OpenAI API and /metrics: rr and random place
	// requests on them, and their prefix-cache counters and KV-cache size
	// are read for every policy.
	Engines []string
	// Routers are the router replicas the router policy sends to, each
	// client connection pinned to one as their Service pins it.
	Routers []string
}

// check names a missing or malformed URL.
func (ep Endpoints) check(policies []string) error {
	var errs []error
	if len(ep.Engines) == 0 {
		errs = append(errs, errors.New("--engines: give the engines' base URLs (comma-separated, e.g. http://10.0.1.5:8000)"))
	}
	if slices.Contains(policies, PolicyRouter) && len(ep.Routers) == 0 {
		errs = append(errs, errors.New("--router-urls: the router policy needs the routers' base URLs"))
	}
	for flag, urls := range map[string][]string{"--engines": ep.Engines, "--router-urls": ep.Routers} {
		for _, u := range urls {
			if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				errs = append(errs, fmt.Errorf("%s: %q is not a base URL (want http://host:port)", flag, u))
			}
		}
	}
	for _, p := range policies {
		if !slices.Contains(EndpointPolicies, p) {
			errs = append(errs, fmt.Errorf("--policies: %q does not run against given endpoints (want %s)", p,
				strings.Join(EndpointPolicies, ", ")))
		}
	}
	return errors.Join(errs...)
}

// RunEndpoints runs each policy in turn against endpoints the bench did not
// start, in real time. Their caches are not cleared between policies (a
// production engine offers no way to): each policy's prompts are drawn
// with its own seed (the workload's seed plus the policy's position), so
// no policy finds another's prefixes cached, and every counter is read as
// its growth over the policy's run. Before the first policy a prefill
// probe times the engines' cached and uncached prompts, and each policy's
// hit rate is read against the workload's ceiling on the engines' cache
// (HitCeiling).
func RunEndpoints(ctx context.Context, w Workload, policies []string, ep Endpoints, opts LiveOptions,
	progress io.Writer) (Report, error) {
	w.Replicas = len(ep.Engines)
	opts.TimeScale = 1
	rep := Report{Mode: "endpoints", Workload: w.Normalize(), Live: &LiveInfo{TimeScale: 1}}
	if err := errors.Join(ep.check(policies), w.check()); err != nil {
		return rep, err
	}
	model, err := loadLiveModel(opts)
	if err != nil {
		return rep, err
	}
	caches, err := readCaches(ctx, ep.Engines)
	if err != nil {
		return rep, err
	}
	rep.Caches = &caches
	probe, err := probePrefill(ctx, w, ep.Engines[0], caches.BlockSize, opts)
	if err != nil {
		return rep, err
	}
	rep.Probe = &probe
	fmt.Fprintf(progress, "bench: %d engines, %d KV blocks of %d tokens in all; prefill probe: uncached %.0f ms, cached %.0f ms\n",
		len(ep.Engines), caches.Blocks, caches.BlockSize, probe.UncachedMS, probe.CachedMS)
	for k, policy := range policies {
		wk := w
		wk.Seed = w.Seed + uint64(k)
		prep, err := buildLivePrompts(wk, model)
		if err != nil {
			return rep, err
		}
		reqs, err := prep.requests(wk, 1)
		if err != nil {
			return rep, err
		}
		side := liveSide{policy: policy, engines: ep.Engines, target: clientPlaced(policy, wk, ep.Engines)}
		if policy == PolicyRouter {
			side.target, side.routers = serviceSpread(wk, ep.Routers), ep.Routers
		}
		start := time.Now()
		s, _, err := measureLive(ctx, wk, reqs, side, opts, progress)
		if err != nil {
			return rep, fmt.Errorf("policy %s: %w", policy, err)
		}
		rep.Live.WallSeconds += time.Since(start).Seconds()
		if prep.text != nil || prep.work != nil {
			s.HitCeiling = hitCeiling(prep.prompts(), caches)
		}
		rep.Policies = append(rep.Policies, s)
	}
	return rep, nil
}
