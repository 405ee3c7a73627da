// Package constmetric helps the router's packages export their own counters
// as Prometheus collectors that read a snapshot at scrape time, which keeps
// their hot paths free of metric updates: each package owns its series and
// their names, the serve command registers the collectors.
package constmetric

import "github.com/prometheus/client_golang/prometheus"

// Desc describes a series without constant labels.
func Desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// Describe sends ds on ch, for a collector's Describe.
func Describe(ch chan<- *prometheus.Desc, ds ...*prometheus.Desc) {
	for _, d := range ds {
		ch <- d
	}
}

// Emitter sends samples on a collector's Collect channel.
type Emitter chan<- prometheus.Metric

// Gauge sends one gauge sample.
func (e Emitter) Gauge(d *prometheus.Desc, v float64, labels ...string) {
	e <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// Counter sends one counter sample.
func (e Emitter) Counter(d *prometheus.Desc, v int64, labels ...string) {
	e <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

// Kinds sends one counter sample per kind, d having the single label
// "kind".
func (e Emitter) Kinds(d *prometheus.Desc, vs map[string]int64) {
	for k, v := range vs {
		e.Counter(d, v, k)
	}
}

// Bool is 1 for true, 0 for false, for 0/1 gauges.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
