package discovery

import (
	"github.com/prometheus/client_golang/prometheus"

	cm "github.com/llmd-dev/terraform-provider-llmd/router/constmetric"
)

// Collector exports the fleet's view at scrape time: the pods, this
// router's requests open on each, whose load is stale, which publish no KV
// events, which are out of service and why, and scrape and discovery
// errors.
type Collector struct{ Fleet *Fleet }

var _ prometheus.Collector = Collector{}

var (
	descPods     = cm.Desc("llmd_router_pods", "Ready pods discovery reports.")
	descInFlight = cm.Desc("llmd_router_pod_in_flight", "Requests this router has open on the pod.", "pod")
	descPending  = cm.Desc("llmd_router_pod_pending_prefill_tokens", "Uncached prompt tokens of this router's requests on the pod that have no first byte yet: "+
		"the prefill the engine runs ahead of its waiting requests, whose sum over the replicas limits.max_pending_prefill_per_pod (--max-pending-prefill-per-pod) bounds for the lower classes.", "pod")
	descPeerFlight = cm.Desc("llmd_router_pod_peer_in_flight", "Requests the peer router replicas have open on the pod, as they last reported.", "pod")
	descStale      = cm.Desc("llmd_router_pod_load_stale", "1 while the pod's scraped load is older than metrics.stale_after: it is scored without load.", "pod")
	descPreempting = cm.Desc("llmd_router_pod_preempting", "1 for a minute after a scrape saw the pod's vllm:num_preemptions_total rise: its engine ran out of KV blocks "+
		"for its running requests, and under the KV bound (limits.kv_output_reserve) every class starts there only within the whole cache.", "pod")
	descSilent     = cm.Desc("llmd_router_pod_kv_events_silent", "1 while the pod was sent requests but published no KV events for discovery.kv_events_silent_after: the index is blind to it.", "pod")
	descScrapeErrs = cm.Desc("llmd_router_pod_scrape_errors_total", "Failed /metrics scrapes of the pod.", "pod")
	descUpdateErrs = cm.Desc("llmd_router_discovery_update_errors_total", "Discovery reports the router could not follow completely.")
	descOut        = cm.Desc("llmd_router_pod_out_of_service", "1 while the pod is left out of scoring, with the reason: scrape_failing "+
		"(metrics.eject_after_failures scrapes in a row failed) or frozen (requests running, token counters flat for metrics.frozen_after).", "pod", "reason")
)

// Describe implements prometheus.Collector.
func (Collector) Describe(ch chan<- *prometheus.Desc) {
	cm.Describe(ch, descPods, descInFlight, descPending, descPeerFlight, descStale, descPreempting, descSilent, descScrapeErrs, descUpdateErrs, descOut)
}

// Collect implements prometheus.Collector.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	e := cm.Emitter(ch)
	pods := c.Fleet.loads(nil, true)
	e.Gauge(descPods, float64(len(pods)))
	silent := map[string]bool{}
	for _, sl := range c.Fleet.Silences() {
		silent[sl.Pod] = true
	}
	for _, p := range pods {
		e.Gauge(descInFlight, float64(p.Load.InFlight-p.Load.PeerInFlight), p.Name)
		if _, pending, _, ok := c.Fleet.OwnLoad(p.Name); ok {
			e.Gauge(descPending, float64(pending), p.Name)
		}
		e.Gauge(descPeerFlight, float64(p.Load.PeerInFlight), p.Name)
		e.Gauge(descStale, cm.Bool(!p.Load.Fresh), p.Name)
		e.Gauge(descPreempting, cm.Bool(p.Load.Preempting), p.Name)
		e.Gauge(descSilent, cm.Bool(silent[p.Name]), p.Name)
	}
	for _, h := range c.Fleet.Health() {
		e.Counter(descScrapeErrs, h.ScrapeErrs, h.Pod)
	}
	for _, o := range c.Fleet.Out() {
		e.Gauge(descOut, 1, o.Pod, o.Reason)
	}
	e.Counter(descUpdateErrs, c.Fleet.UpdateErrors())
}
