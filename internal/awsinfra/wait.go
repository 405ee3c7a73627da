package awsinfra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// PollIntervalEnv overrides how often waiters poll AWS (a Go duration). Real
// AWS needs no more than the default; tests against moto and the stand-in
// set it to milliseconds so waits over injected states stay short.
const PollIntervalEnv = "LLMD_AWS_POLL_INTERVAL"

const defaultPollInterval = 10 * time.Second

// Logger receives one line per wait (what, elapsed) and per adopted part, so
// a long apply says what it is doing. The provider routes it to tflog.
type Logger func(ctx context.Context, msg string, fields map[string]any)

func (c *Clients) logf(ctx context.Context, msg string, fields map[string]any) {
	if c.Log != nil {
		c.Log(ctx, msg, fields)
	}
}

func (c *Clients) pollInterval() time.Duration {
	if c.PollInterval > 0 {
		return c.PollInterval
	}
	return defaultPollInterval
}

// pollIntervalFromEnv reads PollIntervalEnv; zero means the default.
func pollIntervalFromEnv() (time.Duration, error) {
	v := os.Getenv(PollIntervalEnv)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive Go duration such as \"100ms\"", PollIntervalEnv, v)
	}
	return d, nil
}

// errPending tells waitFor the object is not there yet; any other error ends the wait.
var errPending = errors.New("pending")

// pending makes a not-yet error carrying the last observed state for the timeout message.
func pending(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errPending}, args...)...)
}

// waitFor polls check until it returns nil or a final error, or ctx ends
// (the Terraform timeout). what names the object and the state awaited, e.g.
// "EKS cluster demo to become ACTIVE"; the log and the timeout error say it.
func (c *Clients) waitFor(ctx context.Context, what string, check func(context.Context) error) error {
	began := time.Now()
	c.logf(ctx, "waiting for "+what, nil)
	ticker := time.NewTicker(c.pollInterval())
	defer ticker.Stop()
	last := "nothing yet"
	for {
		err := check(ctx)
		if err == nil {
			c.logf(ctx, "done waiting for "+what, map[string]any{"elapsed": time.Since(began).Round(time.Millisecond).String()})
			return nil
		}
		if ctx.Err() == nil && !errors.Is(err, errPending) {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if errors.Is(err, errPending) {
			last = strings.TrimPrefix(err.Error(), errPending.Error()+": ")
			c.logf(ctx, "still waiting for "+what, map[string]any{"elapsed": time.Since(began).Round(time.Millisecond).String(), "state": last})
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for %s (last seen: %s); raise the timeouts block or inspect the object in AWS",
				time.Since(began).Round(time.Millisecond), what, last)
		case <-ticker.C:
		}
	}
}
