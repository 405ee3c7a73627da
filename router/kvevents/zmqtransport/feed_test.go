package zmqtransport

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"

	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

var heartbeat = []simEvent{{Type: "BlockRemoved", BlockHashes: []uint64{0xdead}}}

// joined publishes heartbeats until the feed receives one, past ZeroMQ's slow
// joiner window, and returns the seq it saw.
func joined(t *testing.T, p publisher, f kvevents.Feed) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		p.publish(t, heartbeat, false)
		m, ok, err := f.Recv(50 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if ok && !m.Connected {
			return m.Seq
		}
	}
	t.Fatal("subscriber never received a message")
	return 0
}

func TestFeedReceivesInOrderAndReplays(t *testing.T) {
	p := newGoPub(t, pubOptions{form: kvevents.FormArray, rank: 0, buffer: 100})
	f, err := (&Transport{}).Open(p.endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first := joined(t, p, f)
	for {
		if _, ok, _ := f.Recv(100 * time.Millisecond); !ok {
			break // drain heartbeats still queued
		}
	}
	parent := uint64(7)
	stored := []simEvent{{Type: "BlockStored", BlockHashes: []uint64{8, 9}, Parent: &parent,
		TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 2, Medium: "GPU"}}
	p.publish(t, stored, false)
	m, ok, err := f.Recv(5 * time.Second)
	if err != nil || !ok {
		t.Fatalf("no live message: %v", err)
	}
	var b kvevents.Batch
	if err := kvevents.DecodeBatch(m.Payload, &b); err != nil {
		t.Fatal(err)
	}
	if string(m.Topic) != "kv@test" || len(b.Events) != 1 || b.Events[0].BlockHashes[1] != 9 || !b.HasDPRank {
		t.Fatalf("live message %q %+v", m.Topic, b)
	}
	var seqs []uint64
	if err := f.Replay(first, 5*time.Second, func(m kvevents.Message) error {
		seqs = append(seqs, m.Seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seqs) == 0 || seqs[0] != first || seqs[len(seqs)-1] != m.Seq {
		t.Fatalf("replay from %d gave %v, want %d..%d", first, seqs, first, m.Seq)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("replay out of order: %v", seqs)
		}
	}
}

func TestReplayWaitIsBounded(t *testing.T) {
	// A ROUTER that never answers stands for a hung engine.
	silent, err := zmq.NewSocket(zmq.ROUTER)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	check(t, silent.SetLinger(0), silent.Bind("tcp://127.0.0.1:*"))
	addr := must(silent.GetLastEndpoint())(t)
	f, err := (&Transport{}).Open(kvevents.Endpoint{Pod: "p", Addr: freeAddr(t), ReplayAddr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	err = f.Replay(0, 300*time.Millisecond, func(kvevents.Message) error { return nil })
	if !errors.Is(err, kvevents.ErrReplayTimeout) {
		t.Fatalf("replay from a silent engine: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("bounded replay took %s", took)
	}
	g, _ := (&Transport{}).Open(kvevents.Endpoint{Pod: "p", Addr: freeAddr(t)})
	defer g.Close()
	if err := g.Replay(0, time.Second, nil); !errors.Is(err, kvevents.ErrNoReplay) {
		t.Fatalf("replay without a replay socket: %v", err)
	}
}

func TestMalformedFramesAreErrors(t *testing.T) {
	pub, err := zmq.NewSocket(zmq.PUB)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	check(t, pub.SetLinger(0), pub.Bind("tcp://127.0.0.1:*"))
	f, err := (&Transport{}).Open(kvevents.Endpoint{Pod: "p", Addr: must(pub.GetLastEndpoint())(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pub.SendMessage("topic", []byte{1, 2, 3}, "payload") // a 3-byte seq frame
		m, ok, err := f.Recv(50 * time.Millisecond)
		if ok && !m.Connected {
			t.Fatal("accepted a message with a 3-byte seq")
		}
		if err != nil {
			if !strings.Contains(err.Error(), "seq frame has 3 bytes") {
				t.Fatalf("error %v", err)
			}
			return
		}
	}
	t.Fatal("no error for a malformed message")
}

// TestFeedSurvivesPublisherRestart closes the publisher's socket and binds a
// new one on the same port, as a restarted engine does: the same feed keeps
// receiving through libzmq's reconnect, and reports each connection before
// the first message it carries.
func TestFeedSurvivesPublisherRestart(t *testing.T) {
	addr := freeAddr(t)
	bindPub := func() *zmq.Socket {
		pub := must(zmq.NewSocket(zmq.PUB))(t)
		check(t, pub.SetLinger(0))
		deadline := time.Now().Add(5 * time.Second)
		for pub.Bind(addr) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("cannot rebind %s", addr)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return pub
	}
	f, err := (&Transport{ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond}).Open(
		kvevents.Endpoint{Pod: "p", Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for round := uint64(0); round < 2; round++ {
		pub := bindPub()
		connected, got := false, false
		for deadline := time.Now().Add(10 * time.Second); !got && time.Now().Before(deadline); {
			pub.SendMessage("", binary.BigEndian.AppendUint64(nil, round), "x")
			m, ok, err := f.Recv(50 * time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case ok && m.Connected:
				connected = true
			case ok && m.Seq == round && !connected:
				t.Fatalf("round %d: a message of the new connection came before its Connected notice", round)
			case ok:
				got = m.Seq == round
			}
		}
		pub.Close()
		if !got {
			t.Fatalf("round %d: nothing received from the (re)started publisher", round)
		}
	}
}

// TestTopicFilter subscribes two feeds to one publisher: the one whose topic
// prefix matches receives, the other sees nothing.
func TestTopicFilter(t *testing.T) {
	p := newGoPub(t, pubOptions{form: kvevents.FormMap, rank: 0, buffer: 10})
	ep := p.endpoint()
	ep.Topic = "kv@"
	match := must((&Transport{}).Open(ep))(t)
	defer match.Close()
	ep.Topic = "kv@other-model"
	other := must((&Transport{}).Open(ep))(t)
	defer other.Close()
	joined(t, p, match)
	for i := 0; i < 10; i++ {
		p.publish(t, heartbeat, false)
		if m, ok, err := other.Recv(50 * time.Millisecond); (ok && !m.Connected) || err != nil {
			t.Fatalf("feed subscribed to another topic received a message (%v)", err)
		}
	}
}
