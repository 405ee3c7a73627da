package sim

// vevent is one scheduled happening of the virtual-time loop.
type vevent struct {
	t       float64
	seq     uint64 // ties at equal t resolve in scheduling order: determinism
	kind    veventKind
	pod     int // the pod, or for evRoute the connection
	payload []byte
	req     int     // evRoute, evPeer: the request
	sent    float64 // evRoute: when the client sent it
	phase   phase   // evPeer: what the peers learn of the request
}

type veventKind uint8

const (
	evStepEnd veventKind = iota // a pod's engine step completes
	evDeliver                   // KV-event bytes reach the router
	evScrape                    // the router scrapes every pod's /metrics
	evSample                    // the report samples fleet gauges
	evArrive                    // the next request arrives at the client
	evRoute                     // the router decides a request it was sent
	evPeer                      // a router replica's news of a request reaches its peers
)

// evQueue is a binary min-heap of events by (t, seq).
type evQueue struct {
	items []vevent
	seq   uint64
}

func (q *evQueue) less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	return a.t < b.t || (a.t == b.t && a.seq < b.seq)
}

func (q *evQueue) push(e vevent) {
	e.seq = q.seq
	q.seq++
	q.items = append(q.items, e)
	for i := len(q.items) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.items[i], q.items[p] = q.items[p], q.items[i]
		i = p
	}
}

func (q *evQueue) pop() vevent {
	top := q.items[0]
	last := len(q.items) - 1
	q.items[0] = q.items[last]
	q.items[last] = vevent{}
	q.items = q.items[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < last && q.less(l, m) {
			m = l
		}
		if l+1 < last && q.less(l+1, m) {
			m = l + 1
		}
		if m == i {
			break
		}
		q.items[i], q.items[m] = q.items[m], q.items[i]
		i = m
	}
	return top
}

func (q *evQueue) len() int { return len(q.items) }
