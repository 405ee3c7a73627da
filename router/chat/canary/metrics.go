package canary

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the canary's Prometheus series.
type Metrics struct {
	checks     *prometheus.CounterVec
	enginePath *prometheus.GaugeVec
}

// NewMetrics creates the canary series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmd_router_tokenizer_canary_checks_total",
			Help: "Tokenizer canary rounds by outcome (agree, mismatch, unavailable).",
		}, []string{"model", "result"}),
		enginePath: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llmd_router_tokenizer_engine_path",
			Help: "1 while the model's requests are tokenized by the engine after a canary mismatch, else 0.",
		}, []string{"model"}),
	}
	for _, c := range []prometheus.Collector{m.checks, m.enginePath} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(model string, r Result) {
	if m != nil {
		m.checks.WithLabelValues(model, string(r)).Inc()
	}
}

func (m *Metrics) setPath(model string, engine bool) {
	if m == nil {
		return
	}
	v := 0.0
	if engine {
		v = 1
	}
	m.enginePath.WithLabelValues(model).Set(v)
}
