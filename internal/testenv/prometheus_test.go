package testenv

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// TestPrometheusScrapesWithTargetLabels: a target's series carry the target
// labels given, and the target's own `pod` label arrives as exported_pod,
// as under the operator's honor_labels false.
func TestPrometheusScrapesWithTargetLabels(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("# TYPE demo_in_flight gauge\ndemo_in_flight{pod=\"vllm-0\"} 3\n"))
	}))
	defer srv.Close()
	p := StartPrometheus(t, ScrapeTarget{URL: srv.URL, Labels: map[string]string{"namespace": "llmd", "pod": "router-0", "job": "router"}})
	p.WaitScraped(t, 1, 2)
	v, err := p.Query(`demo_in_flight`, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 {
		t.Fatalf("demo_in_flight: %v, want one series", v)
	}
	want := model.Metric{"__name__": "demo_in_flight", "namespace": "llmd", "pod": "router-0", "exported_pod": "vllm-0",
		"job": "router", "instance": model.LabelValue(srv.Listener.Addr().String())}
	if !v[0].Metric.Equal(want) || v[0].Value != 3 {
		t.Errorf("got %v = %v, want %v = 3", v[0].Metric, v[0].Value, want)
	}
}
