package discovery

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// BenchmarkScrape scrapes a simulated replica's real /metrics page (the
// families and histograms vLLM serves, gzip-encoded when asked, as
// prometheus_client does) over loopback: with Go's default client, which asks
// for gzip, and with the fleet's default client. The replica runs in this
// process, so ns/op includes its side; allocations are mostly the router's.
func BenchmarkScrape(b *testing.B) {
	f, err := sim.StartFleet(sim.FleetConfig{Replicas: 1, Host: "127.0.0.1",
		Replica: sim.ReplicaConfig{Model: "m", Engine: sim.DefaultEngineConfig()}})
	if err != nil {
		b.Fatal(err)
	}
	stop := f.Start(context.Background())
	b.Cleanup(func() { _ = stop() })
	url := f.Infos[0].HTTP + "/metrics"
	for _, c := range []struct {
		name   string
		client *http.Client
	}{{"go-default", &http.Client{}}, {"fleet-default", scrapeClient()}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := scrape(context.Background(), c.client, url, time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
