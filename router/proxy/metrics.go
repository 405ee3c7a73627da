package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// Decision outcomes, the values of llmd_router_decisions_total's label.
const (
	outcomeRouted        = "routed"        // scored with the prompt's blocks
	outcomeUntokenizable = "untokenizable" // routed on load alone
	outcomeInvalid       = "invalid"       // refused with 400 or 413
	outcomeNoPods        = "no_pods"       // nothing ready (or left) to try
	outcomeShed          = "shed"          // 429 or 503 from admission (ShedError)
)

// Metrics are the serving front's Prometheus series. A nil *Metrics
// records nothing, so tests and embedders may leave it out.
type Metrics struct {
	reg       *prometheus.Registry
	decisions *prometheus.CounterVec
	matched   prometheus.Histogram
	untok     *prometheus.CounterVec
	retries   prometheus.Counter
	upstream  *prometheus.HistogramVec
	ttft      *prometheus.HistogramVec
	responses *prometheus.CounterVec
	overheads *prometheus.HistogramVec
	waits     *prometheus.HistogramVec
	sheds     *prometheus.CounterVec
}

// latencyBuckets span a cached short answer (ms) to a long stream queued
// behind a full batch (minutes).
var latencyBuckets = prometheus.ExponentialBucketsRange(0.001, 300, 20)

// NewMetrics creates the serving series and registers them with reg, which
// Handler then serves (reg may hold other packages' series too).
func NewMetrics(reg *prometheus.Registry) (*Metrics, error) {
	m := &Metrics{
		reg: reg,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmd_router_decisions_total",
			Help: "Requests to the inference endpoints by routing outcome (routed, untokenizable, invalid, no_pods, shed)."},
			[]string{"outcome"}),
		matched: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "llmd_router_prefix_blocks_matched_ratio",
			Help:    "Share of a tokenized request's full blocks the chosen pod held as leading blocks (index and speculation).",
			Buckets: prometheus.LinearBuckets(0, 0.1, 11)}),
		untok: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmd_router_untokenizable_requests_total",
			Help: "Requests routed on load alone because their prompt could not be tokenized, by reason."}, []string{"reason"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "llmd_router_retries_total",
			Help: "Attempts retried on another pod after a connection failure or 5xx before any byte reached the client."}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "llmd_router_upstream_duration_seconds",
			Help: "Time from sending a request to a pod to the end of its response body.", Buckets: latencyBuckets},
			[]string{"endpoint"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "llmd_router_upstream_first_byte_seconds",
			Help:    "Time from sending a request to a pod to the first byte of its body: time to first token for streams.",
			Buckets: latencyBuckets}, []string{"endpoint"}),
		overheads: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "llmd_router_overhead_seconds",
			Help: "The router's share of a client's wait for the first byte: reading the request, routing, queueing, " +
				"failed attempts and relaying the first chunk.", Buckets: prometheus.ExponentialBucketsRange(10e-6, 1, 30)},
			[]string{"endpoint"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmd_router_upstream_responses_total",
			Help: "Responses passed on from pods, by endpoint and status code."}, []string{"endpoint", "code"}),
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "llmd_router_queue_wait_seconds",
			Help:    "Time a request waited for a pod under its capacity, by priority class and how the wait ended (admitted, shed, left).",
			Buckets: latencyBuckets}, []string{"class", "outcome"}),
		sheds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmd_router_shed_total",
			Help: "Requests admission refused, by priority class and reason (over_share: 429, the tenant held its share of " +
				"the class's queue; no_capacity: 503, the queue was full or no slot freed within the class's time-to-live)."},
			[]string{"class", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.matched, m.untok, m.retries, m.upstream, m.ttft, m.responses, m.overheads, m.waits, m.sheds} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering serving metrics: %w", err)
		}
	}
	return m, nil
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// endpoint keeps the label set small: the two routed paths, and "other".
func endpoint(path string) string {
	switch path {
	case chat.PathCompletions:
		return "completions"
	case chat.PathChatCompletions:
		return "chat_completions"
	}
	return "other"
}

func (m *Metrics) decision(outcome string) {
	if m != nil {
		m.decisions.WithLabelValues(outcome).Inc()
	}
}

// decided records a committed first decision and how much of the prompt
// the chosen pod held.
func (m *Metrics) decided(d *scoring.Decision) {
	if m == nil {
		return
	}
	if d.Untokenizable != "" {
		m.decisions.WithLabelValues(outcomeUntokenizable).Inc()
		return
	}
	m.decisions.WithLabelValues(outcomeRouted).Inc()
	if d.Blocks > 0 {
		m.matched.Observe(float64(d.Scores[d.Chosen].Hit.Blocks) / float64(d.Blocks))
	}
}

func (m *Metrics) untokenizable(reason string) {
	if m != nil {
		m.untok.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) retry() {
	if m != nil {
		m.retries.Inc()
	}
}

func (m *Metrics) firstByte(path string, d time.Duration) {
	if m != nil {
		m.ttft.WithLabelValues(endpoint(path)).Observe(d.Seconds())
	}
}

func (m *Metrics) upstreamDone(path string, code int, d time.Duration) {
	if m != nil {
		ep := endpoint(path)
		m.upstream.WithLabelValues(ep).Observe(d.Seconds())
		m.responses.WithLabelValues(ep, strconv.Itoa(code)).Inc()
	}
}

func (m *Metrics) overhead(path string, d time.Duration) {
	if m != nil {
		m.overheads.WithLabelValues(endpoint(path)).Observe(d.Seconds())
	}
}

// queueWait records one wait for a slot in class and how it ended.
func (m *Metrics) queueWait(class string, err error, d time.Duration) {
	if m == nil {
		return
	}
	outcome := "admitted"
	var se *ShedError
	switch {
	case errors.As(err, &se):
		outcome = "shed"
		m.sheds.WithLabelValues(class, se.shedReason()).Inc()
	case err != nil:
		outcome = "left"
	}
	m.waits.WithLabelValues(class, outcome).Observe(d.Seconds())
}
