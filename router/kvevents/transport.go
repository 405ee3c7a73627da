package kvevents

import (
	"errors"
	"time"
)

// Message is one publication of an engine: [topic, seq, payload] on the wire.
type Message struct {
	Topic []byte
	// Seq counts the engine process's messages from 0; a restart resets it.
	Seq     uint64
	Payload []byte
	// Connected marks a notice rather than a publication: the feed has just
	// completed a connection with a publisher (first contact, a reconnect
	// after a network break or an engine restart, a publisher connecting to
	// a bound feed). What the publisher sent while it was not connected is
	// lost, and the process behind it may be a new one.
	Connected bool
}

// Endpoint says where one engine publisher is reached. With data
// parallelism each rank publishes on its own ports, so each rank is its own
// Endpoint under the same Pod.
type Endpoint struct {
	// Pod names the pod in the index (index.Engine.Pod).
	Pod string
	// Addr is the publisher's address, e.g. "tcp://10.0.0.5:5557".
	Addr string
	// Bind makes the router bind Addr and the publisher connect to it, as
	// vLLM does when its endpoint names a host instead of "*".
	Bind bool
	// ReplayAddr is the engine's replay ROUTER socket; "" when replay is off.
	ReplayAddr string
	// Topic is the subscription prefix; "" receives every topic.
	Topic string
}

// ErrNoReplay reports a replay asked of an endpoint without a replay socket.
var ErrNoReplay = errors.New("endpoint has no replay socket")

// ErrReplayTimeout reports a replay whose end marker did not arrive in time.
var ErrReplayTimeout = errors.New("replay did not finish in time")

// Transport opens the sockets of one endpoint. It is an interface so that
// packages that only decode events or query the index do not link ZeroMQ
// (package zmqtransport implements it with libzmq).
type Transport interface {
	Open(ep Endpoint) (Feed, error)
}

// Waker is a Feed whose Recv another goroutine can cut short. The Ingestor
// wakes a follower's feed when it stops the follower, so a long Config.Poll
// delays neither a pod's removal nor a shutdown.
type Waker interface {
	// Wake makes a Recv in progress, or the next one, return at once with
	// ok=false. It is safe from any goroutine, also during or after Close.
	Wake()
}

// Feed is a live subscription to one publisher plus its replay channel. One
// goroutine owns a Feed; it is not safe for concurrent use (but see Waker).
type Feed interface {
	// Recv returns the next message, or ok=false if none arrived within
	// timeout. A Feed reconnects by itself and reports every completed
	// connection as a Connected message, before any message it carries;
	// errors are reported so that they can be counted, and the caller simply
	// calls Recv again.
	Recv(timeout time.Duration) (m Message, ok bool, err error)
	// Replay asks the publisher for the messages it kept with seq >= start
	// and calls fn for each, in order, until the end marker. It gives up
	// after wait with ErrReplayTimeout; fn's error ends the replay early.
	Replay(start uint64, wait time.Duration, fn func(Message) error) error
	// Close releases the sockets.
	Close() error
}
