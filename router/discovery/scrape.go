package discovery

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

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
