package scoring

import (
	"github.com/prometheus/client_golang/prometheus"

	cm "github.com/llmd-dev/terraform-provider-llmd/router/constmetric"
)

// Collector exports the picker's Stats at scrape time.
type Collector struct{ Picker *Picker }

var _ prometheus.Collector = Collector{}

var descPicker = cm.Desc("llmd_router_picker_total", "Picker outcomes by kind: decisions, untokenizable decisions, failed speculative writes.", "kind")

// Describe implements prometheus.Collector.
func (Collector) Describe(ch chan<- *prometheus.Desc) { cm.Describe(ch, descPicker) }

// Collect implements prometheus.Collector.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.Picker.Stats()
	cm.Emitter(ch).Kinds(descPicker, map[string]int64{"decisions": s.Decisions, "untokenizable": s.Untokenizable, "speculate_errors": s.SpeculateErrs})
}
