package picker

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
)

// Outcomes of a picker request, the values of
// llmd_router_picker_requests_total's label.
const (
	outcomeRouted        = "routed"        // scored with the prompt's blocks
	outcomeUntokenizable = "untokenizable" // routed on load alone
	outcomePassthrough   = "passthrough"   // another path: fewest in flight
	outcomeInvalid       = "invalid"       // 400 or 413
	outcomeNoPods        = "no_pods"       // 503: nothing eligible
	outcomeShed          = "shed"          // 429
	outcomeLeft          = "left"          // the stream ended while queued
)

// Metrics are the picker front's Prometheus series: the gateway mode's
// share of the router's work, beside the proxy's series (whose decision
// counters count both fronts' decisions).
type Metrics struct {
	requests  *prometheus.CounterVec
	decisions prometheus.Histogram
	elsewhere prometheus.Counter
	reported  prometheus.Counter
	streams   prometheus.Gauge
}

// NewMetrics creates the picker's series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmd_router_picker_requests_total",
			Help: "Requests the gateway asked the endpoint picker about, by outcome " +
				"(routed, untokenizable, passthrough, invalid, no_pods, shed, left)."}, []string{"outcome"}),
		decisions: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "llmd_router_picker_decision_seconds",
			Help:    "Time from the request's headers to the picker's destination answer (body buffering, queueing and deciding).",
			Buckets: prometheus.ExponentialBucketsRange(10e-6, 30, 30)}),
		elsewhere: prometheus.NewCounter(prometheus.CounterOpts{Name: "llmd_router_picker_served_elsewhere_total",
			Help: "Requests the gateway reported served by another endpoint than the picked one (it fell back down the list)."}),
		reported: prometheus.NewCounter(prometheus.CounterOpts{Name: "llmd_router_picker_served_reported_total",
			Help: "Routed requests whose serving endpoint the gateway reported (envoy.lb x-gateway-destination-endpoint-served); " +
				"fewer than the routed requests means the gateway does not report it, and speculation cannot follow its fallbacks."}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "llmd_router_picker_open_streams",
			Help: "ext_proc streams open: requests between the gateway's first message and the end of their response."}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.decisions, m.elsewhere, m.reported, m.streams} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering picker metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) outcome(o string) {
	if m != nil {
		m.requests.WithLabelValues(o).Inc()
	}
}

// outcomeFor names the outcome of a refusal for err, answered with HTTP
// status code.
func outcomeFor(err error, code int) string {
	var shed *proxy.ShedError
	switch {
	case errors.As(err, &shed):
		return outcomeShed
	case code == http.StatusServiceUnavailable:
		return outcomeNoPods
	}
	return outcomeInvalid
}

func (m *Metrics) decided(d time.Duration) {
	if m != nil {
		m.decisions.Observe(d.Seconds())
	}
}

func (m *Metrics) servedReported() {
	if m != nil {
		m.reported.Inc()
	}
}

func (m *Metrics) servedElsewhere() {
	if m != nil {
		m.elsewhere.Inc()
	}
}

func (m *Metrics) streamOpened() {
	if m != nil {
		m.streams.Inc()
	}
}

func (m *Metrics) streamClosed() {
	if m != nil {
		m.streams.Dec()
	}
}
