package sim

import "container/heap"

// waitQueue is an engine's waiting queue, ordered by its scheduling policy.
type waitQueue interface {
	len() int
	front() *Request
	push(r *Request)
	// requeue puts back a preempted request: at the front under FCFS, by
	// its key under the priority policy.
	requeue(r *Request)
	pop() *Request
	// remove takes r out wherever it is, reporting whether it was there.
	remove(r *Request) bool
}

// newWaitQueue returns the waiting queue of policy (vLLM v0.32.0
// vllm/v1/core/sched/request_queue.py create_request_queue).
func newWaitQueue(policy SchedulingPolicy) waitQueue {
	if policy == PolicyPriority {
		return &priorityQueue{}
	}
	return &fcfsQueue{}
}

// fcfsQueue is the FCFS waiting queue: new requests join at the back,
// preempted ones return to the front (FCFSRequestQueue).
type fcfsQueue struct {
	items []*Request
	head  int
}

func (q *fcfsQueue) len() int        { return len(q.items) - q.head }
func (q *fcfsQueue) front() *Request { return q.items[q.head] }
func (q *fcfsQueue) push(r *Request) { q.items = append(q.items, r) }
func (q *fcfsQueue) requeue(r *Request) {
	if q.head > 0 {
		q.head--
		q.items[q.head] = r
		return
	}
	q.items = append(q.items, nil)
	copy(q.items[1:], q.items)
	q.items[0] = r
}

func (q *fcfsQueue) pop() *Request {
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

func (q *fcfsQueue) remove(r *Request) bool {
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

// priorityQueue is the priority policy's waiting queue, a heap on
// (priority, arrival, id), lowest first, as vLLM's PriorityRequestQueue
// orders by Request.__lt__. A preempted request has no place at the front:
// it rejoins by its key (prepend_request is add_request there).
type priorityQueue struct{ h requestHeap }

func (q *priorityQueue) len() int           { return len(q.h) }
func (q *priorityQueue) front() *Request    { return q.h[0] }
func (q *priorityQueue) push(r *Request)    { heap.Push(&q.h, r) }
func (q *priorityQueue) requeue(r *Request) { heap.Push(&q.h, r) }
func (q *priorityQueue) pop() *Request      { return heap.Pop(&q.h).(*Request) }

func (q *priorityQueue) remove(r *Request) bool {
	for i, x := range q.h {
		if x == r {
			heap.Remove(&q.h, i)
			return true
		}
	}
	return false
}

// requestHeap implements heap.Interface over requests by scheduledBefore.
type requestHeap []*Request

func (h requestHeap) Len() int           { return len(h) }
func (h requestHeap) Less(i, j int) bool { return scheduledBefore(h[i], h[j]) }
func (h requestHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *requestHeap) Push(x any)        { *h = append(*h, x.(*Request)) }
func (h *requestHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return r
}

// scheduledBefore is vLLM's Request.__lt__: the lower priority value first,
// then the earlier arrival, then the lower id.
func scheduledBefore(a, b *Request) bool {
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	if a.Arrival != b.Arrival {
		return a.Arrival < b.Arrival
	}
	return a.ID < b.ID
}
