package peers

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// follower follows one peer's batches and applies them: its speculative
// entries to the index, held until the peer says the request started; its
// loads to the fleet. What it applied is undone when the peer goes.
type follower struct {
	x      *Exchange
	addr   string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// retry cuts a wait between streams short, and opening closes the
	// connection whose stream is not open yet, ending its wait for the
	// peer to be reachable (retryNow).
	retry   chan struct{}
	opening atomic.Pointer[grpc.ClientConn]

	// holds are the peer's open speculative entries, by its hold ID, and
	// demands its requests' KV demands counted by Config.KV, by demand ID;
	// only the follower's goroutine touches them.
	holds   map[uint64]*index.Hold
	demands map[uint64]*demand
}

func newFollower(x *Exchange, addr string) *follower {
	ctx, cancel := context.WithCancel(context.Background())
	return &follower{x: x, addr: addr, ctx: ctx, cancel: cancel, done: make(chan struct{}), retry: make(chan struct{}, 1),
		holds: make(map[uint64]*index.Hold), demands: make(map[uint64]*demand)}
}

// retryNow ends a wait between streams, or for the peer to be
// reachable, at once: a peer just started following this replica, so one
// that refused a moment ago may be up. The wait for the peer is gRPC's
// reconnect backoff, which a new connection starts afresh. (gRPC's own
// ResetConnectBackoff reads the connection's subchannels without its lock,
// a crash when they change at the same moment: grpc-go v1.84.0
// clientconn.go, grpc/grpc-go#9155.)
func (f *follower) retryNow() {
	if cc := f.opening.Swap(nil); cc != nil {
		_ = cc.Close()
	}
	select {
	case f.retry <- struct{}{}:
	default:
	}
}

func (f *follower) close() {
	f.cancel()
	<-f.done
}

// Retry waits after a lost stream: from retryMin doubling to retryMax, and
// CutOff after a malformed frame.
const (
	retryMin = 200 * time.Millisecond
	retryMax = 10 * time.Second
)

// errCutOff marks a stream ended for a malformed frame.
var errCutOff = errors.New("cut off")

func (f *follower) run() {
	defer close(f.done)
	wait := retryMin
	for f.ctx.Err() == nil {
		// A new connection for each stream: it connects lazily, and its
		// reconnect backoff only delays the stream waiting to open.
		cc, err := dial(f.addr)
		if err != nil {
			f.x.c.rejected("address")
			f.x.cfg.Logger.Warn("peer address refused", "peer", f.addr, "err", err)
			return
		}
		applied, err := f.follow(cc)
		_ = cc.Close()
		f.reset()
		if f.ctx.Err() != nil {
			return
		}
		if isSelf(err) {
			return // our own address: nothing to follow
		}
		if applied {
			f.x.c.lost.Add(1)
			f.x.cfg.Logger.Warn("peer lost; deciding without it until it is back", "peer", f.addr, "err", err)
			wait = retryMin
		}
		pause := wait
		if errors.Is(err, errCutOff) {
			f.x.c.cutOffs.Add(1)
			f.x.cfg.Logger.Warn("peer cut off for a malformed message", "peer", f.addr, "for", f.x.cfg.CutOff.String(), "err", err)
			pause = f.x.cfg.CutOff
		} else {
			wait = min(2*wait, retryMax)
		}
		var retry <-chan struct{}
		if !errors.Is(err, errCutOff) {
			retry = f.retry
		}
		select {
		case <-f.ctx.Done():
			return
		case <-time.After(pause):
		case <-retry:
		}
	}
}

// follow applies one stream's batches until it ends; applied says whether
// any arrived.
func (f *follower) follow(cc *grpc.ClientConn) (applied bool, err error) {
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	// Waiting for the peer to be reachable is gRPC's reconnect backoff
	// (retryMin to retryMax), cut short by retryNow closing cc.
	f.opening.Store(cc)
	cs, err := f.x.open(ctx, cc, methodFollow, true)
	f.opening.CompareAndSwap(cc, nil)
	if err != nil {
		return false, err
	}
	// A peer that sends nothing for SilentAfter (it sends a full batch
	// every FullEvery) is as good as gone.
	watchdog := time.AfterFunc(f.x.cfg.SilentAfter, cancel)
	defer watchdog.Stop()
	var fr frame
	for {
		if err := cs.RecvMsg(&fr); err != nil {
			return applied, err
		}
		watchdog.Reset(f.x.cfg.SilentAfter)
		m, err := decodeBatch(fr.b)
		if err != nil {
			f.x.c.rejected("malformed")
			return applied, errors.Join(errCutOff, err)
		}
		if m.ID == f.x.id {
			return applied, errReachedSelf
		}
		if !applied {
			applied = true
			f.x.c.connected.Add(1)
			defer f.x.c.connected.Add(-1)
			f.x.cfg.Logger.Info("following peer", "peer", f.addr, "id", m.ID)
		}
		f.x.c.received.Add(1)
		f.apply(&m)
	}
}

// apply applies one batch.
func (f *follower) apply(m *batch) {
	x := f.x
	x.setPeerLoads(f.addr, m.Loads, m.Full)
	x.setPeerCounts(f.addr, peerCounts{waiting: m.Waiting, work: m.Work})
	if bs := x.cfg.Index.BlockSize(); len(m.Specs)+len(m.Demands) > 0 && (bs == 0 || bs != m.BlockSize) {
		x.c.skipped("block_size", len(m.Specs)+len(m.Demands))
	} else {
		for i := range m.Specs {
			f.speculate(&m.Specs[i])
			if m.SpecsSince > 0 {
				x.delay.Observe(max(time.Since(time.Unix(0, m.SpecsSince).Add(m.Specs[i].After)).Seconds(), 0))
			}
		}
		for i := range m.Demands {
			f.hold(&m.Demands[i])
		}
	}
	for _, id := range m.Settles {
		if h := f.holds[id]; h != nil {
			h.Settle()
			delete(f.holds, id)
		}
	}
	for _, id := range m.Ends {
		f.unhold(id)
	}
	if x.cfg.KV != nil {
		for _, c := range m.Came {
			x.cfg.KV.PeerClassCame(c)
		}
	}
	if m.Full {
		// What is not open any more ended in a batch this replica lost.
		open, live := set(m.Open), set(m.Live)
		for id, h := range f.holds {
			if !open[id] {
				h.Settle()
				delete(f.holds, id)
			}
		}
		for id := range f.demands {
			if !live[id] {
				f.unhold(id)
			}
		}
	}
}

// set is ids as a set.
func set(ids []uint64) map[uint64]bool {
	m := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// hold counts a peer request's KV demand, if its pod is this replica's.
func (f *follower) hold(d *demand) {
	x := f.x
	if x.cfg.KV == nil {
		return
	}
	if _, _, _, ok := x.cfg.Fleet.OwnLoad(d.Pod); !ok {
		x.c.skipped("unknown_pod", 1)
		return
	}
	if f.demands[d.ID] != nil {
		f.unhold(d.ID)
	} else if len(f.demands) >= maxHoldIDs {
		x.c.skipped("too_many_holds", 1)
		return
	}
	f.demands[d.ID] = d
	x.cfg.KV.PeerKV(d.Pod, d.Chains, d.Own, 1)
	x.c.demands.Add(1)
}

// unhold stops counting demand id, if it is counted.
func (f *follower) unhold(id uint64) {
	if d := f.demands[id]; d != nil {
		delete(f.demands, id)
		f.x.cfg.KV.PeerKV(d.Pod, d.Chains, d.Own, -1)
	}
}

// speculate holds a peer decision's entries, if its pod and rank are
// this replica's.
func (f *follower) speculate(s *spec) {
	x := f.x
	if _, _, _, ok := x.cfg.Fleet.OwnLoad(s.Pod); !ok {
		x.c.skipped("unknown_pod", 1)
		return
	}
	if s.Rank >= max(x.cfg.DataParallelSize, 1) {
		x.c.skipped("rank", 1)
		return
	}
	if old := f.holds[s.Hold]; old != nil {
		old.Settle()
	} else if len(f.holds) >= maxHoldIDs {
		x.c.skipped("too_many_holds", 1)
		return
	}
	h, err := x.cfg.Index.Speculate(index.Engine{Pod: s.Pod, Rank: s.Rank}, s.Keys)
	if err != nil {
		x.c.skipped("index", 1)
		return
	}
	f.holds[s.Hold] = h
	x.c.speculations.Add(1)
}

// reset undoes what the peer's batches applied: its held entries start
// their TTL, its KV demands and loads are forgotten.
func (f *follower) reset() {
	for id, h := range f.holds {
		h.Settle()
		delete(f.holds, id)
	}
	for id := range f.demands {
		f.unhold(id)
	}
	f.x.forgetPeer(f.addr)
}

// errReachedSelf ends a stream whose frames carry this replica's own ID.
var errReachedSelf = errors.New(errSelf)

// isSelf reports an error saying the peer is the asking replica itself,
// from either end of the stream.
func isSelf(err error) bool {
	if errors.Is(err, errReachedSelf) {
		return true
	}
	s, ok := status.FromError(err)
	return ok && strings.Contains(s.Message(), errSelf)
}
