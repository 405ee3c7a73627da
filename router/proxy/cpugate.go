package proxy

import "context"

// cpuGate lets as many requests read their prompt (parse, render, tokenize,
// key the blocks: the router's CPU-bound work) at once as the process has
// cores; the others wait their turn, blocked rather than runnable. A burst
// of hundreds of prompts tokenizing together would share the cores among
// all of them, so every decision of the burst would finish late rather
// than the first ones early, and the goroutines that must run at once
// (the peer exchange, KV-event ingestion, the streams being relayed) would
// queue behind hundreds of runnable ones (BENCHMARKS.md, session 16).
type cpuGate chan struct{}

func newCPUGate(cores int) cpuGate { return make(cpuGate, max(cores, 1)) }

// enter waits for a turn, or for ctx to end.
func (g cpuGate) enter(ctx context.Context) error {
	select {
	case g <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leave ends a turn.
func (g cpuGate) leave() { <-g }
