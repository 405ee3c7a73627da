package proxy

import (
	"slices"
	"time"
)

// classGuard says which classes have had a request lately, at this
// replica or a peer. The bounds that keep room on a pod for a higher class
// (kvBound, the prefill bound) hold a class only within guardFor of a
// higher class's request: with nobody to keep room for, holding it would
// only cost throughput. A client's connections may all reach one replica,
// so each replica tells its peers which classes came, at most once per
// tellEvery a class.
type classGuard struct {
	now  func() time.Time
	last []time.Time // per class, when its last request came, here or to a peer
	told []time.Time // per class, when the peers were last told one came
	// sharer tells the peers (nil: no peers).
	sharer KVSharer
}

// guardFor is how long after a request of a class the classes below it
// are held.
const guardFor = time.Minute

// tellEvery is how often at most the peers hear that a class's requests
// come: far below guardFor, which their guards run for.
const tellEvery = time.Second

func newClassGuard(classes int) *classGuard {
	return &classGuard{now: time.Now, last: make([]time.Time, classes), told: make([]time.Time, classes)}
}

// came notes a request of class, named name, and tells the peers.
func (g *classGuard) came(class int, name string) {
	now := g.now()
	g.last[class] = now
	if g.sharer != nil && now.Sub(g.told[class]) >= tellEvery {
		g.told[class] = now
		g.sharer.KVClassCame(name)
	}
}

// peerCame notes a peer's request of class.
func (g *classGuard) peerCame(class int) { g.last[class] = g.now() }

// guarded says whether a class above class had a request within guardFor.
func (g *classGuard) guarded(class int) bool {
	since := g.now().Add(-guardFor)
	return slices.ContainsFunc(g.last[:class], func(t time.Time) bool { return t.After(since) })
}
