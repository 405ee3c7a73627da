package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	cm "github.com/llmd-dev/terraform-provider-llmd/router/constmetric"
)

// Collector exports the server's own state at scrape time: the admission
// queue and every pod's circuit breaker. The routing core's packages
// (index, kvevents, discovery, scoring) export theirs with their own
// collectors.
type Collector struct{ Server *Server }

var _ prometheus.Collector = Collector{}

var (
	descQueued   = cm.Desc("llmd_router_queued_requests", "Requests waiting for a pod under its capacity, by priority class.", "class")
	descCircuit  = cm.Desc("llmd_router_pod_circuit", "1 for the pod's circuit-breaker state (closed, open: out of scoring, half-open: one probe).", "pod", "state")
	descOpenings = cm.Desc("llmd_router_circuit_openings_total", "Times a pod's circuit breaker opened.")
	descFailed   = cm.Desc("llmd_router_pod_failed_attempts_total", "Attempts on the pod that failed: refused connections, timeouts, 5xx, broken responses (the circuit breaker's input).", "pod")
)

// Describe implements prometheus.Collector.
func (Collector) Describe(ch chan<- *prometheus.Desc) {
	cm.Describe(ch, descQueued, descCircuit, descOpenings, descFailed)
}

// Collect implements prometheus.Collector.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	e, s := cm.Emitter(ch), c.Server
	for c, n := range s.adm.depths() {
		e.Gauge(descQueued, float64(n), s.cfg.Classes[c].Name)
	}
	states, opened := s.br.states()
	e.Counter(descOpenings, opened)
	for _, p := range s.cfg.Fleet.Pods(nil) {
		e.Gauge(descCircuit, 1, p.Name, states[p.Name].String())
		e.Counter(descFailed, s.br.failures(p.Name), p.Name)
	}
}
