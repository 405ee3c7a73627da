package testenv

import (
	"fmt"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"

	"github.com/llmd-dev/terraform-provider-llmd/internal/freeport"
)

// TestZeroMQPubSubRoundTrip proves the ZeroMQ ground (libzmq through
// pebbe/zmq4): a SUB filtered on a vLLM-style topic receives the three-frame
// messages [topic, seq, payload] a PUB sends, and nothing on other topics.
func TestZeroMQPubSubRoundTrip(t *testing.T) {
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	endpoint := fmt.Sprintf("tcp://127.0.0.1:%d", port)
	pub, err := zmq.NewSocket(zmq.PUB)
	if err != nil {
		t.Fatalf("libzmq: %v", err)
	}
	defer pub.Close()
	if err := pub.Bind(endpoint); err != nil {
		t.Fatal(err)
	}
	sub, err := zmq.NewSocket(zmq.SUB)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const topic = "kv@10.250.1.7:8000@Qwen/Qwen2.5-7B-Instruct"
	if err := sub.SetSubscribe(topic); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetRcvtimeo(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := sub.Connect(endpoint); err != nil {
		t.Fatal(err)
	}
	// A SUB joins late (slow joiner): publish until the first message lands.
	deadline := time.Now().Add(10 * time.Second)
	for seq := uint64(0); ; seq++ {
		if time.Now().After(deadline) {
			t.Fatal("no message reached the subscriber in 10s")
		}
		if _, err := pub.SendMessage("other-topic", seqBytes(seq), "ignored"); err != nil {
			t.Fatal(err)
		}
		if _, err := pub.SendMessage(topic, seqBytes(seq), []byte{0x93, 0xcb}); err != nil {
			t.Fatal(err)
		}
		frames, err := sub.RecvMessageBytes(0)
		if err != nil {
			continue // timed out: not joined yet
		}
		if len(frames) != 3 || string(frames[0]) != topic || len(frames[1]) != 8 || string(frames[2]) != "\x93\xcb" {
			t.Fatalf("received %q, want [topic, 8-byte seq, payload]", frames)
		}
		return
	}
}

func seqBytes(seq uint64) []byte {
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = byte(seq)
		seq >>= 8
	}
	return b
}
