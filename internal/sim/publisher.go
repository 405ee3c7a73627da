package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	zmq "github.com/pebbe/zmq4"
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
	go p.serveReplay(router)
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

var endMarker = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

func (p *publisher) serveReplay(router *zmq.Socket) {
	defer close(p.done)
	defer router.Close()
	poller := zmq.NewPoller()
	poller.Add(router, zmq.POLLIN)
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		polled, err := poller.Poll(100 * time.Millisecond)
		if err != nil || len(polled) == 0 {
			continue
		}
		frames, err := router.RecvMessageBytes(0)
		if err != nil || len(frames) != 3 || len(frames[2]) != 8 {
			continue // not a replay request: vLLM ignores those too
		}
		p.replay(router, frames[0], binary.BigEndian.Uint64(frames[2]))
	}
}

func (p *publisher) replay(router *zmq.Socket, id []byte, start uint64) {
	// Oldest kept seq first; a start older than that is answered from there,
	// which the asker sees as an unrecoverable gap.
	p.mu.Lock()
	n := uint64(len(p.ring))
	first := p.next - min(p.next, n)
	seq := max(start, first)
	var msgs [][]byte
	for s := seq; s < p.next; s++ {
		msgs = append(msgs, p.ring[s%n])
	}
	p.mu.Unlock()
	var seqb [8]byte
	for _, m := range msgs {
		binary.BigEndian.PutUint64(seqb[:], seq)
		if _, err := router.SendMessage(id, "", seqb[:], m); err != nil {
			return
		}
		seq++
	}
	router.SendMessage(id, "", endMarker, "")
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
