package kvevents

import (
	"errors"
	"sync"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// rankState is the sequence position of one (pod, DP rank).
type rankState struct {
	rank   int
	seen   bool    // a baseline exists; false at first contact and after a purge
	next   uint64  // the seq expected next
	lastTS float64 // ts of the last applied batch
}

// stream applies one endpoint's messages to the index under the ordering
// rules of DESIGN.md decision 4: in sequence order per (pod, rank); a gap is
// filled by replay or, failing that, the engine is purged and rebuilt; a
// sequence that goes backwards is an engine restart. It is driven by one
// goroutine and holds no locks of its own.
type stream struct {
	ep         Endpoint
	feed       Feed // nil without a transport (benchmarks)
	ix         *index.Index
	applier    Applier
	c          *counters
	replayWait time.Duration
	logf       func(string, ...any)

	ranks    map[int]*rankState
	pos      *positions // ranks' places for Ingestor.Positions
	live     Batch      // decoded live message; replay decodes into its own Batch
	replayed Batch

	afterMalformed bool // the next baseline must not replay (see malformed)
}

// newStream returns the stream of endpoint ep; feed is nil for a stream
// driven directly (tests, benchmarks).
func newStream(ep Endpoint, feed Feed, ix *index.Index, c *counters, replayWait time.Duration, logf func(string, ...any)) *stream {
	return &stream{ep: ep, feed: feed, ix: ix, applier: Applier{Index: ix}, c: c, replayWait: replayWait, logf: logf,
		ranks: make(map[int]*rankState), pos: &positions{by: make(map[int]Position)}}
}

// resumeFrom makes the stream follow each rank of ps from its place, as if
// it had applied every message before it: the first connection then
// resumes each from its last applied message (connected) instead of
// replaying from seq 0. Call it before the first message.
func (s *stream) resumeFrom(ps []Position) {
	for _, p := range ps {
		if p.Next == 0 {
			continue
		}
		rs := &rankState{rank: p.Rank, seen: true, next: p.Next, lastTS: p.LastTS}
		s.ranks[p.Rank] = rs
		s.pos.set(s.ep, rs)
		s.c.resumed.Add(1)
	}
}

// Position is where an ingestor stands in one engine's event sequence:
// what a peer replica needs to follow the engine on from there
// (DESIGN.md decision 6).
type Position struct {
	Pod, Addr string
	Rank      int
	// Next is the seq expected next; LastTS the engine time of the last
	// message applied (seq Next-1), which tells its process from a newer one.
	Next   uint64
	LastTS float64
}

// positions is a stream's place in each rank's sequence, read by other
// goroutines.
type positions struct {
	mu sync.Mutex
	by map[int]Position
}

func (p *positions) set(ep Endpoint, rs *rankState) {
	p.mu.Lock()
	if rs.seen {
		p.by[rs.rank] = Position{Pod: ep.Pod, Addr: ep.Addr, Rank: rs.rank, Next: rs.next, LastTS: rs.lastTS}
	} else {
		delete(p.by, rs.rank)
	}
	p.mu.Unlock()
}

func (p *positions) appendTo(dst []Position) []Position {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, q := range p.by {
		dst = append(dst, q)
	}
	return dst
}

func (s *stream) rank(b *Batch) *rankState {
	r := 0
	if b.HasDPRank {
		r = b.DPRank
	}
	rs := s.ranks[r]
	if rs == nil {
		rs = &rankState{rank: r}
		s.ranks[r] = rs
	}
	return rs
}

func (s *stream) canReplay() bool { return s.feed != nil && s.ep.ReplayAddr != "" }

// onLive handles one message from the live subscription.
func (s *stream) onLive(m Message) {
	if m.Connected {
		s.connected()
		return
	}
	if err := DecodeBatch(m.Payload, &s.live); err != nil {
		s.malformed(m, err)
		return
	}
	rs := s.rank(&s.live)
	switch {
	case !rs.seen:
		s.baseline(rs, m)
	case m.Seq == rs.next:
		s.apply(rs, m.Seq, &s.live)
	case m.Seq < rs.next && s.live.TS <= rs.lastTS:
		// A live copy of a message a replay already applied: it carries that
		// message's engine time, which is no newer than the last one applied.
		s.c.duplicates.Add(1)
	case m.Seq < rs.next:
		s.c.restarts.Add(1)
		s.logf("kvevents: %s rank %d: seq went back from %d to %d: engine restarted", s.ep.Pod, rs.rank, rs.next, m.Seq)
		s.rebuild(rs, m)
	default:
		s.c.gaps.Add(1)
		s.logf("kvevents: %s rank %d: gap, expected seq %d, got %d", s.ep.Pod, rs.rank, rs.next, m.Seq)
		s.fill(rs, m)
	}
}

// connected catches up after the feed connected to the publisher. The first
// connection replays from seq 0, since prefixes that stay cached never emit
// BlockStored again. A reconnection replays each rank from its last applied
// message: whatever was sent while disconnected is lost, and the publisher
// may be a new process whose sequence has already passed, or just reached,
// the seq expected next, which no live message could reveal. The publisher
// still holding that message unchanged is the same process.
func (s *stream) connected() {
	s.c.connections.Add(1)
	if !s.canReplay() {
		return
	}
	var seen []*rankState
	for _, rs := range s.ranks {
		if rs.seen {
			seen = append(seen, rs)
		}
	}
	if len(seen) == 0 {
		s.replay(0, nil)
		return
	}
	for _, rs := range seen {
		if !rs.seen { // an earlier rank's rebuild replayed it from 0
			continue
		}
		switch s.resume(rs, nil) {
		case replayRestarted:
			s.restartedDuringReplay(rs)
		case replayUnanchored:
			s.unanchored(rs)
			s.replay(0, nil)
		}
	}
}

// malformed handles a message that does not decode. Its rank is unknown and
// a replay would return the same bytes, so every rank of the endpoint is
// purged and the next good message starts a new baseline: a lost
// BlockRemoved would otherwise leave the index claiming blocks that are gone.
func (s *stream) malformed(m Message, err error) {
	s.c.decodeErrors.Add(1)
	s.logf("kvevents: %s seq %d: %v", s.ep.Pod, m.Seq, err)
	for _, rs := range s.ranks {
		s.purge(rs)
	}
	s.afterMalformed = true
}

// fill recovers the messages between rs.next and live message m.
func (s *stream) fill(rs *rankState, m Message) {
	if s.canReplay() {
		switch s.resume(rs, s.bound(m)) {
		case replayRestarted:
			s.restartedDuringReplay(rs)
			return
		case replayUnanchored:
			s.unanchored(rs)
		default:
			if s.settle(rs, m) {
				return
			}
		}
	}
	s.rebuild(rs, m)
}

// resume replays rank rs from its last applied message, which the publisher
// must still hold unchanged: a restart can carry the sequence past the gap
// (or up to the seq expected next), and only the engine time of a message
// the router already applied tells the new process from the old one.
func (s *stream) resume(rs *rankState, live *liveBound) replayOutcome {
	return s.replay(rs.next-1, &replayCheck{rank: rs.rank, anchored: true, anchorTS: rs.lastTS, live: live})
}

// unanchored logs a resume that found the last applied message gone: the
// publisher restarted with a shorter history, or its buffer moved past it.
func (s *stream) unanchored(rs *rankState) {
	s.logf("kvevents: %s rank %d: the publisher no longer holds seq %d; rebuilding", s.ep.Pod, rs.rank, rs.next-1)
	s.purge(rs)
}

// rebuild purges the engine and rebuilds it from whatever the publisher
// still keeps, then continues with m.
func (s *stream) rebuild(rs *rankState, m Message) {
	s.purge(rs)
	s.baseline(rs, m)
}

// baseline starts rank rs's sequence at live message m. Messages before m
// may still sit in the publisher's replay buffer (the subscription joined
// late, or the router purged), so they are replayed first; only seq 0, a
// publisher without replay, or the message after a malformed one (whose
// replay would bring the same bytes back) start directly at m.
func (s *stream) baseline(rs *rankState, m Message) {
	if m.Seq > 0 && s.canReplay() && !s.afterMalformed {
		if s.replay(0, &replayCheck{rank: rs.rank, live: s.bound(m)}) == replayRestarted {
			s.restartedDuringReplay(rs)
			return
		}
		if s.settle(rs, m) {
			return
		}
		// The replay stopped short of m: what it applied has a hole after it.
		s.purge(rs)
	}
	s.afterMalformed = false
	s.apply(rs, m.Seq, &s.live)
}

// settle applies live message m after a replay if it is next, and reports
// whether the stream is continuous again.
func (s *stream) settle(rs *rankState, m Message) bool {
	switch {
	case !rs.seen || m.Seq == rs.next:
		s.apply(rs, m.Seq, &s.live)
		return true
	case m.Seq < rs.next:
		s.c.duplicates.Add(1)
		return true
	}
	return false
}

func (s *stream) purge(rs *rankState) {
	s.ix.Purge(index.Engine{Pod: s.ep.Pod, Rank: rs.rank})
	*rs = rankState{rank: rs.rank}
	s.pos.set(s.ep, rs)
	s.c.purges.Add(1)
}

// liveBound is the live message a replay fills in before.
type liveBound struct {
	seq uint64
	ts  float64
}

func (s *stream) bound(m Message) *liveBound {
	return &liveBound{seq: m.Seq, ts: s.live.TS}
}

// replayCheck is what a replay must show of one rank to come from the
// process the router has been following.
type replayCheck struct {
	rank int
	// anchored: the replay starts at the rank's last applied message, which
	// must come back first with engine time anchorTS.
	anchored bool
	anchorTS float64
	// live, if set, is a live message of that process: engine time must be
	// older before its seq and equal at it.
	live *liveBound
}

// replayOutcome is how a replay ended.
type replayOutcome int

const (
	replayDone       replayOutcome = iota // applied (or failed, and counted)
	replayRestarted                       // the publisher is a newer process
	replayUnanchored                      // the anchor message is no longer kept
)

// restartedDuringReplay handles a replay that showed a newer engine process
// than the one the router followed: what the index holds of the rank, and
// any live message being filled in, belong to a dead process, so the rank is
// rebuilt from the new one's replay.
func (s *stream) restartedDuringReplay(rs *rankState) {
	s.c.restarts.Add(1)
	s.logf("kvevents: %s rank %d: replay came from a restarted engine", s.ep.Pod, rs.rank)
	s.purge(rs)
	s.replay(0, nil)
}

// errRestarted and errUnanchored end a replay early.
var (
	errRestarted  = errors.New("publisher restarted")
	errUnanchored = errors.New("anchor message no longer kept")
)

// replay applies the publisher's kept messages from start, in order, for
// every rank: a rank without a baseline takes its first replayed message as
// one; a rank with a baseline applies only its next seq, so a hole inside the
// replay leaves it short, which the caller sees. With a check it stops at
// the first sign that the publisher is not the process the check describes.
func (s *stream) replay(start uint64, chk *replayCheck) replayOutcome {
	s.c.replays.Add(1)
	if start == 0 && (chk == nil || !chk.anchored) {
		s.c.fullReplays.Add(1)
	}
	anchorSeen := false
	err := s.feed.Replay(start, s.replayWait, func(m Message) error {
		if err := DecodeBatch(m.Payload, &s.replayed); err != nil {
			s.c.decodeErrors.Add(1)
			s.logf("kvevents: %s replayed seq %d: %v", s.ep.Pod, m.Seq, err)
			return nil // the rank stays short of it
		}
		rs := s.rank(&s.replayed)
		if chk != nil && rs.rank == chk.rank {
			ts := s.replayed.TS
			if chk.anchored && !anchorSeen {
				if m.Seq != start {
					return errUnanchored
				}
				if ts != chk.anchorTS {
					return errRestarted
				}
				anchorSeen = true
			}
			if l := chk.live; l != nil && ((m.Seq < l.seq && ts > l.ts) || (m.Seq == l.seq && ts != l.ts)) {
				return errRestarted
			}
		}
		if !rs.seen || m.Seq == rs.next {
			s.apply(rs, m.Seq, &s.replayed)
		}
		return nil
	})
	switch {
	case errors.Is(err, errRestarted):
		return replayRestarted
	case errors.Is(err, errUnanchored):
		return replayUnanchored
	case err != nil:
		s.c.replayFailures.Add(1)
		s.logf("kvevents: %s replay from %d: %v", s.ep.Pod, start, err)
	case chk != nil && chk.anchored && !anchorSeen:
		return replayUnanchored
	}
	return replayDone
}
