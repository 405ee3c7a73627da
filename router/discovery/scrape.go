package discovery

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// scrapeClient keeps a connection open to every pod, however many, and
// asks for pages uncompressed. Go's default transport keeps at most 100 idle
// connections in all, so past 100 pods scrapes would dial anew, and it asks
// for gzip, whose decoding costs the router more CPU (BenchmarkScrape) than
// the bytes it saves inside the cluster network are worth.
// Scrapes go straight to pod IPs, never through a proxy named in the
// environment.
func scrapeClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0, // no limit across pods
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// scrape fetches and parses one pod's /metrics.
func scrape(ctx context.Context, client *http.Client, url string, timeout time.Duration) (Scraped, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Scraped{}, fmt.Errorf("scraping %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Scraped{}, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Scraped{}, fmt.Errorf("scraping %s: status %s", url, resp.Status)
	}
	s, err := ParseMetrics(resp.Body)
	if err != nil {
		return Scraped{}, fmt.Errorf("scraping %s: %w", url, err)
	}
	return s, nil
}

// scrapeLoop scrapes ps every interval until ctx ends. A failed scrape
// leaves the last good values in place; they go stale by themselves. Each
// scrape also judges the pod's service (health.judge), and is the probe
// that brings an ejected pod back.
func (f *Fleet) scrapeLoop(ctx context.Context, ps *podState) {
	tick := time.NewTicker(f.cfg.Metrics.Interval.Duration)
	defer tick.Stop()
	url := ps.pod.HTTP + "/metrics"
	for {
		s, err := scrape(ctx, f.cfg.Client, url, f.cfg.Metrics.Timeout.Duration)
		if ctx.Err() != nil {
			return
		}
		now := f.cfg.Now()
		ps.mu.Lock()
		if err != nil {
			ps.scrapeErrs++
			ps.lastErr = err
		} else {
			if s.HasPreemptions && ps.scraped.HasPreemptions && s.Preemptions > ps.scraped.Preemptions {
				ps.preemptedAt = now
			}
			ps.scraped, ps.scrapedAt = s, now
		}
		began, ended := ps.health.judge(ps.pod.Name, s, err, now, f.cfg.Metrics.EjectAfterFailures, f.cfg.Metrics.FrozenAfter.Duration)
		ps.mu.Unlock()
		switch {
		case began.Reason != "":
			f.cfg.Logger.Warn("pod out of service", "pod", began.Pod, "reason", began.Reason, "detail", began.Detail)
		case ended:
			f.cfg.Logger.Info("pod back in service", "pod", ps.pod.Name)
		}
		f.checkSilence(ps)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
