package prompt

import "runtime"

// turns lets as many requests do the router's CPU-bound prompt work at
// once (parse the body, render the chat template, tokenize) as the process
// has cores; the others wait their turn, blocked rather than runnable. A
// burst of hundreds of prompts worked on together would share the cores
// among all of them, so the burst's decisions would all finish late rather
// than the first ones early, and the goroutines that must run at once (the
// peer exchange, KV-event ingestion, the streams being relayed) would queue
// behind hundreds of runnable ones (BENCHMARKS.md, session 16). A nil turns
// has no limit. Tokenizing on an engine is network I/O and takes no turn.
type turns chan struct{}

func newTurns(cores int) turns { return make(turns, max(cores, 1)) }

// take waits for a turn and returns its release, which may be called more
// than once. Release yields the processor before it hands the turn on:
// a turn handed over a channel readies its next holder to run next on this
// processor, inheriting the time slice, so a run of prompts would keep the
// processor for up to the scheduler's 10 ms slice while the goroutines
// readied meanwhile (a peer's news, KV events, streams) wait; yielding
// first lets them run between two prompts.
func (t turns) take() (release func()) {
	if t == nil {
		return func() {}
	}
	t <- struct{}{}
	held := true
	return func() {
		if held {
			held = false
			runtime.Gosched()
			<-t
		}
	}
}
