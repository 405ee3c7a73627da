package kvevents

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// Config configures an Ingestor.
type Config struct {
	// Index receives the events.
	Index *index.Index
	// Transport opens the endpoints' sockets.
	Transport Transport
	// ReplayWait bounds one replay (default 2s): a replay that does not end
	// in time counts as failed, and the lifecycle rules fall back to a purge.
	ReplayWait time.Duration
	// Poll is how long a follower waits for a message before it checks
	// whether it was stopped (default 1s). Stopping wakes a Waker feed at
	// once; the poll bounds it for other feeds. Every wake-up costs CPU, once
	// per followed pod.
	Poll time.Duration
	// Logf receives one line per notable event (gap, restart, purge); nil
	// discards them.
	Logf func(format string, args ...any)
}

// Ingestor follows every endpoint's KV events, one goroutine per endpoint,
// so each engine's events apply in order and different engines in parallel.
type Ingestor struct {
	cfg Config
	c   counters

	mu        sync.Mutex
	followers map[followKey]*follower
	closed    bool
	// resume holds the peer positions an endpoint not yet followed starts
	// from (Resume).
	resume map[followKey][]Position
}

type followKey struct{ pod, addr string }

type follower struct {
	ep   Endpoint
	from []Position // where to resume from (Resume), nil: seq 0
	pos  *positions // set once its stream exists
	stop chan struct{}
	done chan struct{}
	last atomic.Int64 // unix nanoseconds of the last live message, 0 before any

	mu   sync.Mutex
	feed Feed // once opened, for waking it
}

// wake cuts short the follower's wait for a message, if its feed can.
func (f *follower) wake() {
	f.mu.Lock()
	feed := f.feed
	f.mu.Unlock()
	if w, ok := feed.(Waker); ok {
		w.Wake()
	}
}

// FeedStatus is one followed endpoint and when it last delivered a live
// message (zero: never), for spotting a publisher that stays silent.
type FeedStatus struct {
	Endpoint
	LastMessage time.Time
}

// Feeds reports the endpoints of pod being followed, in no set order.
func (in *Ingestor) Feeds(pod string) []FeedStatus {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []FeedStatus
	for k, f := range in.followers {
		if k.pod != pod {
			continue
		}
		fs := FeedStatus{Endpoint: f.ep}
		if ns := f.last.Load(); ns != 0 {
			fs.LastMessage = time.Unix(0, ns)
		}
		out = append(out, fs)
	}
	return out
}

// New returns an Ingestor following no endpoint yet.
func New(cfg Config) (*Ingestor, error) {
	if cfg.Index == nil || cfg.Transport == nil {
		return nil, errors.New("kvevents: Config needs an Index and a Transport")
	}
	if cfg.ReplayWait <= 0 {
		cfg.ReplayWait = 2 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return &Ingestor{cfg: cfg, followers: make(map[followKey]*follower)}, nil
}

// Add starts following ep. Its first connection asks for a replay from seq 0.
func (in *Ingestor) Add(ep Endpoint) error {
	if ep.Pod == "" || ep.Addr == "" {
		return fmt.Errorf("following KV events: endpoint %+v needs a Pod and an Addr", ep)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return errors.New("following KV events: ingestor closed")
	}
	key := followKey{ep.Pod, ep.Addr}
	if in.followers[key] != nil {
		return fmt.Errorf("following KV events of %s at %s: already followed", ep.Pod, ep.Addr)
	}
	f := &follower{ep: ep, from: in.resume[key], stop: make(chan struct{}), done: make(chan struct{})}
	delete(in.resume, key)
	in.followers[key] = f
	in.c.pods.Add(1)
	go in.follow(f)
	return nil
}

// Resume makes the endpoints named in ps, once added, follow each engine
// from a peer replica's place in its sequence instead of replaying it from
// seq 0; the index must hold what the peer held there (index.Import). A
// position for an endpoint already followed is ignored.
func (in *Ingestor) Resume(ps []Position) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.resume == nil {
		in.resume = make(map[followKey][]Position)
	}
	for _, p := range ps {
		key := followKey{p.Pod, p.Addr}
		if in.followers[key] == nil {
			in.resume[key] = append(in.resume[key], p)
		}
	}
}

// Positions reports where the ingestor stands in every followed engine's
// sequence (engines without a baseline are left out), for a peer's warm
// start. Read them before exporting the index: events applied in between
// are applied again from the positions, which is harmless.
func (in *Ingestor) Positions() []Position {
	in.mu.Lock()
	fs := make([]*follower, 0, len(in.followers))
	for _, f := range in.followers {
		fs = append(fs, f)
	}
	in.mu.Unlock()
	var out []Position
	for _, f := range fs {
		f.mu.Lock()
		p := f.pos
		f.mu.Unlock()
		if p != nil {
			out = p.appendTo(out)
		}
	}
	return out
}

// Remove stops following every endpoint of the pods, closes their sockets
// and drops the pods' engines from the index. The followers stop together,
// so removing many pods (a shutdown, a node group drained) costs one poll
// interval, not one per pod.
func (in *Ingestor) Remove(pods ...string) {
	gone := make(map[string]bool, len(pods))
	for _, p := range pods {
		gone[p] = true
	}
	in.mu.Lock()
	var stopping []*follower
	for k, f := range in.followers {
		if gone[k.pod] {
			stopping = append(stopping, f)
			delete(in.followers, k)
		}
	}
	for k := range in.resume {
		if gone[k.pod] {
			delete(in.resume, k)
		}
	}
	in.mu.Unlock()
	in.stop(stopping)
	for p := range gone {
		in.cfg.Index.DropPod(p)
	}
}

// Sync makes the followed endpoints equal eps, as discovery reports them:
// new endpoints are added, pods no longer listed removed.
func (in *Ingestor) Sync(eps []Endpoint) error {
	want := make(map[string]bool)
	for _, ep := range eps {
		want[ep.Pod] = true
	}
	in.mu.Lock()
	var gone []string
	for k := range in.followers {
		if !want[k.pod] {
			gone = append(gone, k.pod)
		}
	}
	in.mu.Unlock()
	in.Remove(gone...)
	var errs []error
	for _, ep := range eps {
		in.mu.Lock()
		followed := in.followers[followKey{ep.Pod, ep.Addr}] != nil
		in.mu.Unlock()
		if !followed {
			errs = append(errs, in.Add(ep))
		}
	}
	return errors.Join(errs...)
}

// Close stops every follower. The index keeps what it learned.
func (in *Ingestor) Close() {
	in.mu.Lock()
	in.closed = true
	var all []*follower
	for k, f := range in.followers {
		all = append(all, f)
		delete(in.followers, k)
	}
	in.mu.Unlock()
	in.stop(all)
}

func (in *Ingestor) stop(fs []*follower) {
	for _, f := range fs {
		close(f.stop)
		f.wake()
	}
	for _, f := range fs {
		<-f.done
		in.c.pods.Add(-1)
	}
}

// Stats returns a snapshot of the ingestion counters.
func (in *Ingestor) Stats() Stats { return in.c.snapshot() }

// follow owns one endpoint's feed: it opens it (retrying with backoff),
// then handles its messages and connection notices until stopped.
func (in *Ingestor) follow(f *follower) {
	defer close(f.done)
	feed := in.open(f)
	if feed == nil {
		return
	}
	defer feed.Close()
	f.mu.Lock()
	f.feed = feed
	f.mu.Unlock()
	s := newStream(f.ep, feed, in.cfg.Index, &in.c, in.cfg.ReplayWait, in.cfg.Logf)
	s.resumeFrom(f.from)
	f.mu.Lock()
	f.pos = s.pos
	f.mu.Unlock()
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		m, ok, err := feed.Recv(in.cfg.Poll)
		if err != nil {
			in.c.transportErrors.Add(1)
			in.cfg.Logf("kvevents: %s at %s: %v", f.ep.Pod, f.ep.Addr, err)
			continue
		}
		if ok {
			f.last.Store(time.Now().UnixNano())
			s.onLive(m)
		}
	}
}

// open opens f's feed, backing off from 100ms to 5s between failures (a bind
// address still held by a previous router, a malformed address fixed by a
// later discovery update). It returns nil when stopped first.
func (in *Ingestor) open(f *follower) Feed {
	backoff := 100 * time.Millisecond
	for {
		feed, err := in.cfg.Transport.Open(f.ep)
		if err == nil {
			return feed
		}
		in.c.transportErrors.Add(1)
		in.cfg.Logf("kvevents: opening %s at %s: %v (retrying in %s)", f.ep.Pod, f.ep.Addr, err, backoff)
		select {
		case <-f.stop:
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
