package canary

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
)

// Config configures the Guard of one model.
type Config struct {
	// Model is the served model name, used in metrics and logs.
	Model string
	// Local is the in-process renderer and tokenizer of the model.
	Local *chat.Model
	// Pod returns the base URL (http://ip:port) of one pod serving the
	// model, or "" when none is known.
	Pod func() string
	// Samples are the canary requests; nil means DefaultSamples().
	Samples []Sample
	// Interval is the time between canary rounds; 0 means five minutes.
	Interval time.Duration
	// Engine asks pods for ids; the zero value uses http.DefaultClient.
	Engine Engine
	// Metrics receives the canary's results; nil disables metrics.
	Metrics *Metrics
	// Logger gets one line per mismatch and per change of path; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Guard decides, per model, whether requests are tokenized in process or
// by the engine. It starts on the in-process path; a canary round whose ids
// differ from the engine's switches it to the engine path, and a later
// round that agrees switches it back. It is safe for concurrent use.
type Guard struct {
	cfg      Config
	fallback atomic.Bool
}

// New returns a Guard on the in-process path.
func New(cfg Config) *Guard {
	if cfg.Samples == nil {
		cfg.Samples = DefaultSamples()
	}
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Guard{cfg: cfg}
}

// OnEnginePath reports whether requests currently go to the engine.
func (g *Guard) OnEnginePath() bool { return g.fallback.Load() }

// Tokenize returns the ids of each prompt of req: in process, or from one
// pod's tokenizer while the canary has found a mismatch.
func (g *Guard) Tokenize(ctx context.Context, req *chat.Request) ([][]uint32, error) {
	if !g.fallback.Load() {
		return g.cfg.Local.Tokenize(req)
	}
	if req.Untokenizable != nil {
		return nil, req.Untokenizable
	}
	pod := g.cfg.Pod()
	if pod == "" {
		return nil, fmt.Errorf("model %s: tokenizing on the engine path: no pod known", g.cfg.Model)
	}
	return g.cfg.Engine.Tokenize(ctx, pod, req)
}

// Result is the outcome of one canary round.
type Result string

// Canary round outcomes, also the values of the metric's result label.
const (
	Agree       Result = "agree"
	Mismatch    Result = "mismatch"
	Unavailable Result = "unavailable" // no pod, or the pod could not answer
)

// Check runs one canary round against one pod and switches the path when
// the outcome calls for it. An unavailable engine leaves the path as it is:
// without an answer there is nothing to trust more than the current path.
func (g *Guard) Check(ctx context.Context) (Result, error) {
	res, err := g.compare(ctx)
	g.cfg.Metrics.observe(g.cfg.Model, res)
	switch res {
	case Mismatch:
		if !g.fallback.Swap(true) {
			g.cfg.Logger.Warn("tokenizer canary mismatch: switching model to the engine's tokenizer",
				"model", g.cfg.Model, "error", err)
		} else {
			g.cfg.Logger.Warn("tokenizer canary still disagrees", "model", g.cfg.Model, "error", err)
		}
	case Agree:
		if g.fallback.Swap(false) {
			g.cfg.Logger.Info("tokenizer canary agrees again: back to in-process tokenizing", "model", g.cfg.Model)
		}
	case Unavailable:
		g.cfg.Logger.Warn("tokenizer canary could not ask the engine", "model", g.cfg.Model, "error", err)
	}
	g.cfg.Metrics.setPath(g.cfg.Model, g.fallback.Load())
	return res, err
}

// compare tokenizes every sample both ways.
func (g *Guard) compare(ctx context.Context) (Result, error) {
	pod := g.cfg.Pod()
	if pod == "" {
		return Unavailable, errors.New("no pod known")
	}
	for i, s := range g.cfg.Samples {
		req, err := chat.ParseRequest(s.Path, s.Body)
		if err != nil {
			return Unavailable, fmt.Errorf("sample %d: %w", i, err)
		}
		ours, err := g.cfg.Local.Tokenize(req)
		if err != nil {
			// A sample we cannot render while the engine can is a mismatch
			// too: our path would be wrong for such requests.
			ours = nil
		}
		theirs, engineErr := g.cfg.Engine.Tokenize(ctx, pod, req)
		if engineErr != nil {
			return Unavailable, fmt.Errorf("sample %d: %w", i, engineErr)
		}
		if err != nil {
			return Mismatch, fmt.Errorf("sample %d: engine tokenized it, we could not: %w", i, err)
		}
		if !slices.EqualFunc(ours, theirs, slices.Equal) {
			return Mismatch, fmt.Errorf("sample %d (%s): ids differ: %s", i, s.Path, firstDifference(ours, theirs))
		}
	}
	return Agree, nil
}

func firstDifference(a, b [][]uint32) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d prompts, engine %d", len(a), len(b))
	}
	for p := range a {
		n := min(len(a[p]), len(b[p]))
		for i := 0; i < n; i++ {
			if a[p][i] != b[p][i] {
				return fmt.Sprintf("prompt %d token %d: ours %d, engine %d", p, i, a[p][i], b[p][i])
			}
		}
		if len(a[p]) != len(b[p]) {
			return fmt.Sprintf("prompt %d: %d tokens, engine %d", p, len(a[p]), len(b[p]))
		}
	}
	return "none"
}

// Run checks at once and then every Interval until ctx ends.
func (g *Guard) Run(ctx context.Context) {
	t := time.NewTicker(g.cfg.Interval)
	defer t.Stop()
	for {
		g.Check(ctx) //nolint:errcheck // Check logs and counts its outcome
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
