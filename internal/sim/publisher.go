package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	zmq "github.com/pebbe/zmq4"

	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents/zmqtransport"
)

// publisher is one engine's KV-event sockets, as vLLM's ZmqEventPublisher
// binds them: a PUB sending [topic, seq(8, big-endian), payload] per step,
// and a ROUTER answering replay requests ["", start(8)] with
// ["", seq, payload] for every kept message from start on, then the end
// marker ["", ff*8, ""]. The engine's driver goroutine owns the PUB; the
// replay goroutine owns the ROUTER; the kept messages are shared.
type publisher struct {
	pub      *zmq.Socket
	topic    []byte
	pubAddr  string
	replAddr string

	mu   sync.Mutex
	next uint64   // seq of the next message
	ring [][]byte // payload of seq s at s % len(ring), for the last len(ring) seqs

	stop chan struct{}
	done chan struct{}
}

// newPublisher binds a PUB on pubAddr and, unless replayAddr is empty, a
// ROUTER on replayAddr ("tcp://127.0.0.1:0" binds an ephemeral port).
func newPublisher(pubAddr, replayAddr, topic string, bufferSteps int) (*publisher, error) {
	p := &publisher{topic: []byte(topic), ring: make([][]byte, max(bufferSteps, 1)), stop: make(chan struct{}), done: make(chan struct{})}
	var err error
	if p.pub, p.pubAddr, err = bindSocket(zmq.PUB, pubAddr); err != nil {
		return nil, fmt.Errorf("binding KV-event PUB %s: %w", pubAddr, err)
	}
	if replayAddr == "" {
		close(p.done)
		return p, nil
	}
	router, addr, err := bindSocket(zmq.ROUTER, replayAddr)
	if err != nil {
		p.pub.Close()
		return nil, fmt.Errorf("binding KV-event replay ROUTER %s: %w", replayAddr, err)
	}
	p.replAddr = addr
	go func() {
		defer close(p.done)
		zmqtransport.ServeReplay(router, p.stop, p.kept)
	}()
	return p, nil
}

func bindSocket(kind zmq.Type, addr string) (*zmq.Socket, string, error) {
	s, err := zmq.NewSocket(kind)
	if err != nil {
		return nil, "", err
	}
	// vLLM's publisher hwm default; PUB drops beyond it, which subscribers see as gaps.
	err = errors.Join(s.SetLinger(0), s.SetSndhwm(100000))
	if err == nil {
		err = s.Bind(addr)
	}
	var bound string
	if err == nil {
		bound, err = s.GetLastEndpoint()
	}
	if err != nil {
		s.Close()
		return nil, "", err
	}
	return s, bound, nil
}

// publish sends one step's payload and keeps it for replay. Only the
// engine's driver goroutine calls it.
func (p *publisher) publish(payload []byte) error {
	p.mu.Lock()
	seq := p.next
	p.next++
	p.ring[seq%uint64(len(p.ring))] = payload
	p.mu.Unlock()
	var seqb [8]byte
	binary.BigEndian.PutUint64(seqb[:], seq)
	if _, err := p.pub.SendMessage(p.topic, seqb[:], payload); err != nil {
		return fmt.Errorf("publishing KV events seq %d: %w", seq, err)
	}
	return nil
}

// kept returns the kept messages from start on. A start older than the
// oldest kept is answered from there, which the asker sees as an
// unrecoverable gap.
func (p *publisher) kept(start uint64) []zmqtransport.Kept {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := uint64(len(p.ring))
	var out []zmqtransport.Kept
	for s := max(start, p.next-min(p.next, n)); s < p.next; s++ {
		out = append(out, zmqtransport.Kept{Seq: s, Payload: p.ring[s%n]})
	}
	return out
}

// close stops the replay goroutine and closes the sockets.
func (p *publisher) close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	p.pub.Close()
}
