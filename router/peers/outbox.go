package peers

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// outbox gathers this replica's news between batches and sends each batch
// to every subscribed peer. Decisions only append under mu; one goroutine
// encodes and fans out.
type outbox struct {
	x *Exchange

	mu       sync.Mutex
	nextHold uint64
	open     map[uint64]struct{} // holds shared and not settled
	specs    []spec
	since    time.Time // when the oldest of specs was decided
	settles  []uint64
	// KV demands: those not ended by ID, those placed and ended since the
	// last batch.
	nextDemand uint64
	live       map[uint64]struct{}
	demands    []demand
	ends       []uint64
	came       map[string]struct{} // classes whose requests came
	dirty      map[string]struct{} // pods whose own load changed
	subs       map[*subscriber]struct{}
	closed     bool

	kick chan struct{}
	done chan struct{}
}

// subscriber is one peer following this replica: frames queue for its
// stream, and are dropped (counted) when it falls subscriberQueue behind.
type subscriber struct{ frames chan []byte }

const subscriberQueue = 256

// specBatchBytes bounds the keys one batch carries (far below
// maxFrameBytes); more specs go in further batches.
const specBatchBytes = 1 << 20

func (o *outbox) init(x *Exchange) {
	o.x = x
	o.open = make(map[uint64]struct{})
	o.live = make(map[uint64]struct{})
	o.came = make(map[string]struct{})
	o.dirty = make(map[string]struct{})
	o.subs = make(map[*subscriber]struct{})
	o.kick = make(chan struct{}, 1)
	o.done = make(chan struct{})
	go o.run()
}

func (o *outbox) wake() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// speculated queues a decision's entries and returns its hold ID (0: not
// shared, too many holds open).
func (o *outbox) speculated(e index.Engine, keys []uint64) uint64 {
	o.mu.Lock()
	if len(o.open) >= maxHoldIDs || len(keys) > maxKeys || len(o.subs) == 0 {
		o.mu.Unlock()
		if len(keys) > maxKeys || len(o.open) >= maxHoldIDs {
			o.x.c.unshared.Add(1)
		}
		return 0
	}
	o.nextHold++
	id := o.nextHold
	o.open[id] = struct{}{}
	now := time.Now()
	if len(o.specs) == 0 {
		o.since = now
	}
	o.specs = append(o.specs, spec{Hold: id, Pod: e.Pod, Rank: e.Rank, Keys: append([]uint64(nil), keys...), After: now.Sub(o.since)})
	o.mu.Unlock()
	o.wake()
	return id
}

// settled queues the end of hold id's wait.
func (o *outbox) settled(id uint64) { o.end(o.open, &o.settles, id) }

// end moves id, when it is in live, to ended, which the next batch sends.
func (o *outbox) end(live map[uint64]struct{}, ended *[]uint64, id uint64) {
	if id == 0 {
		return
	}
	o.mu.Lock()
	if _, ok := live[id]; ok {
		delete(live, id)
		*ended = append(*ended, id)
	}
	o.mu.Unlock()
	o.wake()
}

// kvHeld queues a request's KV demand on pod and returns its ID (0: not
// shared: no peer follows, too many open, or too many keys).
func (o *outbox) kvHeld(pod string, chains [][]uint64, own int) uint64 {
	d := demand{Pod: pod, Own: own, Chains: chains}
	o.mu.Lock()
	if len(o.subs) == 0 {
		o.mu.Unlock()
		return 0
	}
	if len(o.live) >= maxHoldIDs || len(chains) > maxChains || d.keys() > maxKeys {
		o.mu.Unlock()
		o.x.c.unshared.Add(1)
		return 0
	}
	o.nextDemand++
	d.ID = o.nextDemand
	o.live[d.ID] = struct{}{}
	o.demands = append(o.demands, d)
	o.mu.Unlock()
	o.wake()
	return d.ID
}

// kvEnded queues the end of demand id.
func (o *outbox) kvEnded(id uint64) { o.end(o.live, &o.ends, id) }

// classCame queues the news that a request of class came.
func (o *outbox) classCame(class string) {
	o.mu.Lock()
	if len(o.subs) == 0 || len(o.came) >= maxClasses || len(class) > maxNameBytes {
		o.mu.Unlock()
		return
	}
	o.came[class] = struct{}{}
	o.mu.Unlock()
	o.wake()
}

// changed queues pod's own load for the next batch.
func (o *outbox) changed(pod string) {
	o.mu.Lock()
	if len(o.subs) == 0 {
		o.mu.Unlock()
		return
	}
	o.dirty[pod] = struct{}{}
	o.mu.Unlock()
	o.wake()
}

// run sends a batch FlushEvery after news arrives, and a full one every
// FullEvery.
func (o *outbox) run() {
	full := time.NewTicker(o.x.cfg.FullEvery)
	defer full.Stop()
	flush := time.NewTimer(0)
	<-flush.C
	waiting := false
	for {
		select {
		case <-o.done:
			return
		case <-o.kick:
			if !waiting {
				flush.Reset(o.x.cfg.FlushEvery)
				waiting = true
			}
		case <-flush.C:
			waiting = false
			o.send(o.cut(false))
		case <-full.C:
			o.send(o.cut(true))
		}
	}
}

// cut takes the news since the last batch as encoded frames: one, or more
// when the specs' keys would not fit one.
func (o *outbox) cut(full bool) [][]byte {
	o.mu.Lock()
	specs, settles, dirty, since := o.specs, o.settles, o.dirty, o.since
	demands, ends, came := o.demands, o.ends, o.came
	o.specs, o.settles, o.dirty, o.demands, o.ends, o.came = nil, nil, make(map[string]struct{}), nil, nil, make(map[string]struct{})
	var open, live []uint64
	if full {
		open, live = ids(o.open), ids(o.live)
	}
	subs := len(o.subs)
	o.mu.Unlock()
	if subs == 0 || (!full && len(specs) == 0 && len(settles) == 0 && len(dirty) == 0 && len(demands) == 0 && len(ends) == 0 &&
		len(came) == 0) {
		return nil
	}
	own := o.x.ownCounts()
	m := batch{ID: o.x.id, Full: full, BlockSize: o.x.cfg.Index.BlockSize(), Waiting: own.waiting, Work: own.work, Settles: settles,
		Open: open, Ends: ends, Live: live, Came: slices.Sorted(maps.Keys(came))}
	if len(specs) > 0 {
		m.SpecsSince = since.UnixNano()
	}
	if full {
		m.Loads = o.x.ownLoads(nil)
	} else {
		for pod := range dirty {
			if in, pend, top, ok := o.x.cfg.Fleet.OwnLoad(pod); ok {
				m.Loads = append(m.Loads, load{Pod: pod, InFlight: in, Pending: pend, Top: top})
			}
		}
	}
	var frames [][]byte
	for {
		size := 0
		fits := func(keys int) bool {
			if size > 0 && size+8*keys > specBatchBytes {
				return false
			}
			size += 8 * keys
			return true
		}
		n := 0
		for n < len(specs) && n < maxSpecs && fits(len(specs[n].Keys)) {
			n++
		}
		k := 0
		for k < len(demands) && k < maxSpecs && fits(demands[k].keys()) {
			k++
		}
		m.Specs, m.Demands = specs[:n], demands[:k]
		frames = append(frames, m.encode(nil))
		specs, demands = specs[n:], demands[k:]
		if len(specs) == 0 && len(demands) == 0 {
			return frames
		}
		// Loads, settles, ends, classes and the open lists went with the
		// first frame.
		m = batch{ID: o.x.id, BlockSize: m.BlockSize, Waiting: m.Waiting, Work: m.Work, SpecsSince: m.SpecsSince}
	}
}

// ids lists a set's IDs.
func ids(set map[uint64]struct{}) []uint64 {
	out := make([]uint64, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	return out
}

// send queues frames for every subscriber, dropping what a slow one has
// no room for.
func (o *outbox) send(frames [][]byte) {
	if len(frames) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for s := range o.subs {
		for _, f := range frames {
			select {
			case s.frames <- f:
				o.x.c.sent.Add(1)
			default:
				o.x.c.dropped.Add(1)
			}
		}
	}
}

// subscribe adds a peer's stream; its first frame is a full batch of its
// own, so it learns the loads at once.
func (o *outbox) subscribe() *subscriber {
	s := &subscriber{frames: make(chan []byte, subscriberQueue)}
	o.mu.Lock()
	o.subs[s] = struct{}{}
	open := ids(o.open)
	o.mu.Unlock()
	own := o.x.ownCounts()
	m := batch{ID: o.x.id, Full: true, BlockSize: o.x.cfg.Index.BlockSize(), Waiting: own.waiting, Work: own.work,
		Loads: o.x.ownLoads(nil), Open: open}
	s.frames <- m.encode(nil)
	return s
}

func (o *outbox) unsubscribe(s *subscriber) {
	o.mu.Lock()
	delete(o.subs, s)
	o.mu.Unlock()
}

func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.closed = true
		close(o.done)
	}
}

// ownLoads appends this replica's own load of every pod with any.
func (x *Exchange) ownLoads(dst []load) []load {
	for _, pod := range x.cfg.Fleet.PodNames(nil) {
		if in, pend, top, ok := x.cfg.Fleet.OwnLoad(pod); ok && (in > 0 || pend > 0) {
			dst = append(dst, load{Pod: pod, InFlight: in, Pending: pend, Top: top})
		}
	}
	return dst
}
