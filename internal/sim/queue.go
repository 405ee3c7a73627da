package sim

// queue is the FCFS waiting queue: new requests join at the back, preempted
// ones return to the front.
type queue struct {
	items []*Request
	head  int
}

func (q *queue) len() int        { return len(q.items) - q.head }
func (q *queue) front() *Request { return q.items[q.head] }
func (q *queue) push(r *Request) { q.items = append(q.items, r) }
func (q *queue) pushFront(r *Request) {
	if q.head > 0 {
		q.head--
		q.items[q.head] = r
		return
	}
	q.items = append(q.items, nil)
	copy(q.items[1:], q.items)
	q.items[0] = r
}

func (q *queue) pop() *Request {
	r := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	// Reclaim the consumed front once it is most of the slice.
	if q.head > 64 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return r
}

// remove takes r out of the queue wherever it is, reporting whether it was there.
func (q *queue) remove(r *Request) bool {
	for i := q.head; i < len(q.items); i++ {
		if q.items[i] == r {
			copy(q.items[i:], q.items[i+1:])
			q.items[len(q.items)-1] = nil
			q.items = q.items[:len(q.items)-1]
			return true
		}
	}
	return false
}
