package discovery

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// Silence is a pod that was sent requests long enough ago to have stored
// blocks, yet whose KV-event feeds delivered nothing since: the router's
// index is blind to it. vLLM's event config fails open (without
// enable_kv_cache_events the publisher is silently null), and a topic or
// port mismatch yields no error either; only this shows it.
type Silence struct {
	Pod string
	// Since is when the first request the pod has not answered with events
	// was sent.
	Since time.Time
	// Topics and Endpoints are what the router subscribes to for the pod.
	Topics, Endpoints []string
}

func (s Silence) String() string {
	return fmt.Sprintf("pod %s published no KV events since %s although it was sent requests; expected topic %q on %s: "+
		"check the engine's --kv-events-config (enable_kv_cache_events, topic, endpoint port)",
		s.Pod, s.Since.UTC().Format(time.RFC3339), strings.Join(s.Topics, ","), strings.Join(s.Endpoints, ","))
}

// ExpectEvents notes that pod was sent a completion, for which its engine
// publishes BlockStored events once prompt and output fill a block.
func (f *Fleet) ExpectEvents(pod string) {
	f.mu.RLock()
	ps := f.pods[pod]
	f.mu.RUnlock()
	if ps != nil {
		ps.awaiting.CompareAndSwap(0, f.cfg.Now().UnixNano())
	}
}

// checkSilence updates ps's silence and reports it when it starts; called
// from the pod's scrape loop. Without an ingestor nothing is expected.
func (f *Fleet) checkSilence(ps *podState) {
	in := f.cfg.Ingestor
	since := ps.awaiting.Load()
	if in == nil || since == 0 {
		return
	}
	feeds := in.Feeds(ps.pod.Name)
	var last int64
	for _, fs := range feeds {
		if !fs.LastMessage.IsZero() {
			last = max(last, fs.LastMessage.UnixNano())
		}
	}
	if last >= since {
		// Events came after the request: the feed works. Start over.
		ps.awaiting.CompareAndSwap(since, 0)
		if ps.silent.Swap(false) {
			f.cfg.Logger.Info("KV events arrived again", "pod", ps.pod.Name)
		}
		return
	}
	if f.cfg.Now().Sub(time.Unix(0, since)) < f.cfg.SilentAfter || ps.silent.Load() {
		return
	}
	ps.silent.Store(true)
	s := silenceOf(ps.pod.Name, since, feeds)
	f.cfg.Logger.Warn("pod publishes no KV events", "pod", s.Pod, "since", s.Since, "topics", s.Topics, "endpoints", s.Endpoints,
		"detail", s.String())
}

func silenceOf(pod string, since int64, feeds []kvevents.FeedStatus) Silence {
	s := Silence{Pod: pod, Since: time.Unix(0, since)}
	for _, fs := range feeds {
		s.Topics = append(s.Topics, fs.Topic)
		s.Endpoints = append(s.Endpoints, fs.Addr)
	}
	slices.Sort(s.Endpoints)
	s.Topics = slices.Compact(slices.Sorted(slices.Values(s.Topics)))
	return s
}

// Silences lists the pods silent past FleetConfig.SilentAfter, sorted by
// name, for metrics and /readyz.
func (f *Fleet) Silences() []Silence {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []Silence
	for _, name := range f.names {
		ps := f.pods[name]
		if since := ps.awaiting.Load(); since != 0 && ps.silent.Load() && f.cfg.Ingestor != nil {
			out = append(out, silenceOf(name, since, f.cfg.Ingestor.Feeds(name)))
		}
	}
	return out
}
