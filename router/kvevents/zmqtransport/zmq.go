package zmqtransport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"

	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// Transport opens ZeroMQ feeds. The zero value uses the defaults.
type Transport struct {
	// ReconnectMin and ReconnectMax bound libzmq's exponential reconnect
	// backoff towards a vanished publisher (defaults 100ms and 5s).
	ReconnectMin, ReconnectMax time.Duration
	// RcvHWM is the SUB queue limit in messages (default 100000, vLLM's
	// default publisher hwm); messages beyond it are dropped and show up as
	// sequence gaps.
	RcvHWM int
}

var (
	_ kvevents.Transport = (*Transport)(nil)
	_ kvevents.Waker     = (*feed)(nil)
)

// Open creates ep's SUB socket and connects or binds it.
func (t *Transport) Open(ep kvevents.Endpoint) (kvevents.Feed, error) {
	f := &feed{ep: ep, t: t}
	err := f.openWake()
	if err == nil {
		if err = f.openSub(); err != nil {
			f.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("opening KV-event feed of %s at %s: %w", ep.Pod, ep.Addr, err)
	}
	return f, nil
}

// maxSockets bounds the sockets of the transport's libzmq context. Each
// followed endpoint holds five (the SUB, its monitor, the PAIR reading it,
// the two ends of its wake-up pipe) and a replay a sixth while it runs:
// libzmq's default limit of 1,023 (ZMQ_MAX_SOCKETS_DFLT) would refuse the
// 205th pod. 16,384 follows some 3,000 pods; libzmq sizes one table of
// pointers by it.
const maxSockets = 16384

// socketContext is the transport's own libzmq context, made on first use.
// The socket limit is set before its first socket, the only time libzmq
// honours it.
var socketContext = sync.OnceValues(func() (*zmq.Context, error) {
	ctx, err := zmq.NewContext()
	if err != nil {
		return nil, fmt.Errorf("creating the ZeroMQ context: %w", err)
	}
	if err := ctx.SetMaxSockets(maxSockets); err != nil {
		return nil, fmt.Errorf("raising the ZeroMQ socket limit to %d: %w", maxSockets, err)
	}
	return ctx, nil
})

// newSocket opens a socket of the given type in the transport's context.
func newSocket(t zmq.Type) (*zmq.Socket, error) {
	ctx, err := socketContext()
	if err != nil {
		return nil, err
	}
	return ctx.NewSocket(t)
}

// maxMessage bounds one message. A prefill of 100k tokens encodes to about
// 500 KB; the bound keeps a broken or hostile peer from making the router
// buffer and decode gigabytes.
const maxMessage = 64 << 20

type feed struct {
	ep      kvevents.Endpoint
	t       *Transport
	sub     *zmq.Socket
	monitor *zmq.Socket // PAIR receiving sub's handshake events
	poller  *zmq.Poller
	backoff time.Duration

	// The wake-up pipe: Wake sends on wakeSend from any goroutine (under
	// wakeMu, which also orders it before Close), Recv polls wakeRecv.
	wakeMu   sync.Mutex
	wakeSend *zmq.Socket
	wakeRecv *zmq.Socket
}

// monitors numbers the inproc addresses of the feeds' socket monitors and
// wake-up pipes.
var monitors atomic.Uint64

// openWake creates the feed's wake-up pipe, an inproc PAIR pair.
func (f *feed) openWake() error {
	addr := fmt.Sprintf("inproc://llmd-kvevents-wake-%d", monitors.Add(1))
	recv, err := newSocket(zmq.PAIR)
	if err != nil {
		return fmt.Errorf("wake-up socket: %w", err)
	}
	if err := errors.Join(recv.SetLinger(0), recv.Bind(addr)); err != nil {
		recv.Close()
		return fmt.Errorf("wake-up socket: %w", err)
	}
	send, err := newSocket(zmq.PAIR)
	if err != nil {
		recv.Close()
		return fmt.Errorf("wake-up socket: %w", err)
	}
	if err := errors.Join(send.SetLinger(0), send.Connect(addr)); err != nil {
		send.Close()
		recv.Close()
		return fmt.Errorf("wake-up socket: %w", err)
	}
	f.wakeSend, f.wakeRecv = send, recv
	return nil
}

// Wake implements kvevents.Waker: one empty message on the pipe ends the
// poll. A full pipe already holds a wake-up, so a refused send loses none.
func (f *feed) Wake() {
	f.wakeMu.Lock()
	defer f.wakeMu.Unlock()
	if f.wakeSend != nil {
		_, _ = f.wakeSend.SendBytes(nil, zmq.DONTWAIT)
	}
}

// woken reports whether the poll found a wake-up, and drains the pipe.
func (f *feed) woken(polled []zmq.Polled) bool {
	if !slices.ContainsFunc(polled, func(p zmq.Polled) bool { return p.Socket == f.wakeRecv }) {
		return false
	}
	for {
		if _, err := f.wakeRecv.RecvBytes(zmq.DONTWAIT); err != nil {
			return true
		}
	}
}

func (f *feed) openSub() error {
	sub, err := newSocket(zmq.SUB)
	if err != nil {
		return err
	}
	monitor, err := f.watch(sub)
	if err != nil {
		sub.Close()
		return fmt.Errorf("monitoring the SUB socket: %w", err)
	}
	hwm := f.t.RcvHWM
	if hwm <= 0 {
		hwm = 100000
	}
	lo, hi := f.t.ReconnectMin, f.t.ReconnectMax
	if lo <= 0 {
		lo = 100 * time.Millisecond
	}
	if hi <= 0 {
		hi = 5 * time.Second
	}
	err = errors.Join(sub.SetLinger(0), sub.SetRcvhwm(hwm), sub.SetReconnectIvl(lo), sub.SetReconnectIvlMax(hi),
		sub.SetMaxmsgsize(maxMessage), sub.SetSubscribe(f.ep.Topic))
	if err == nil {
		if f.ep.Bind {
			err = sub.Bind(f.ep.Addr)
		} else {
			err = sub.Connect(f.ep.Addr)
		}
	}
	if err != nil {
		monitor.Close()
		sub.Close()
		return err
	}
	f.sub, f.monitor = sub, monitor
	f.poller = zmq.NewPoller()
	f.poller.Add(monitor, zmq.POLLIN)
	f.poller.Add(sub, zmq.POLLIN)
	f.poller.Add(f.wakeRecv, zmq.POLLIN)
	return nil
}

// watch has libzmq report every completed handshake of sub (each new
// connection, in either direction) on an inproc PAIR socket. libzmq emits the
// event before sub's subscription goes out on that connection, so the event
// is queued before any message the connection can carry.
func (f *feed) watch(sub *zmq.Socket) (*zmq.Socket, error) {
	addr := fmt.Sprintf("inproc://llmd-kvevents-monitor-%d", monitors.Add(1))
	if err := sub.Monitor(addr, zmq.EVENT_HANDSHAKE_SUCCEEDED); err != nil {
		return nil, err
	}
	pair, err := newSocket(zmq.PAIR)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(pair.SetLinger(0), pair.Connect(addr)); err != nil {
		pair.Close()
		return nil, err
	}
	return pair, nil
}

// Recv polls the monitor and the SUB socket, the monitor first so that a
// connection is reported before its messages. libzmq reconnects TCP by
// itself; a socket-level error recreates the sockets after a growing pause.
func (f *feed) Recv(timeout time.Duration) (kvevents.Message, bool, error) {
	if f.sub == nil {
		if err := f.reopen(); err != nil {
			return kvevents.Message{}, false, err
		}
	}
	connected, err := f.connected()
	if err == nil && connected {
		return kvevents.Message{Connected: true}, true, nil
	}
	var polled []zmq.Polled
	if err == nil {
		polled, err = f.poller.Poll(timeout)
	}
	if err == nil && (len(polled) == 0 || f.woken(polled)) {
		return kvevents.Message{}, false, nil
	}
	if err == nil {
		if connected, err = f.connected(); err == nil && connected {
			return kvevents.Message{Connected: true}, true, nil
		}
	}
	var frames [][]byte
	if err == nil {
		frames, err = f.sub.RecvMessageBytes(zmq.DONTWAIT)
		if zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN) { // only a monitor event other than a handshake
			return kvevents.Message{}, false, nil
		}
	}
	if err != nil {
		if zmq.AsErrno(err) == zmq.Errno(syscall.EINTR) { // a signal, not a fault
			return kvevents.Message{}, false, nil
		}
		f.closeSub()
		return kvevents.Message{}, false, fmt.Errorf("receiving from %s: %w", f.ep.Addr, err)
	}
	f.backoff = 0
	m, err := parseFrames(frames)
	if err != nil {
		return kvevents.Message{}, false, fmt.Errorf("message from %s: %w", f.ep.Addr, err)
	}
	return m, true, nil
}

// connected reads one pending monitor event without waiting and reports
// whether it was a completed handshake.
func (f *feed) connected() (bool, error) {
	ev, _, _, err := f.monitor.RecvEvent(zmq.DONTWAIT)
	if zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("monitor of %s: %w", f.ep.Addr, err)
	}
	return ev == zmq.EVENT_HANDSHAKE_SUCCEEDED, nil
}

func (f *feed) reopen() error {
	f.backoff = min(max(2*f.backoff, 100*time.Millisecond), 5*time.Second)
	time.Sleep(f.backoff)
	if err := f.openSub(); err != nil {
		return fmt.Errorf("reopening %s: %w", f.ep.Addr, err)
	}
	return nil
}

// parseFrames splits a PUB message [topic, seq(8), payload].
func parseFrames(frames [][]byte) (kvevents.Message, error) {
	if len(frames) != 3 {
		return kvevents.Message{}, fmt.Errorf("%d frames, want [topic, seq, payload]", len(frames))
	}
	if len(frames[1]) != 8 {
		return kvevents.Message{}, fmt.Errorf("seq frame has %d bytes, want 8", len(frames[1]))
	}
	return kvevents.Message{Topic: frames[0], Seq: binary.BigEndian.Uint64(frames[1]), Payload: frames[2]}, nil
}

// Close releases every socket of the feed.
func (f *feed) Close() error {
	err := f.closeSub()
	f.wakeMu.Lock()
	defer f.wakeMu.Unlock()
	if f.wakeSend != nil {
		err = errors.Join(err, f.wakeSend.Close(), f.wakeRecv.Close())
		f.wakeSend, f.wakeRecv = nil, nil
	}
	return err
}

// closeSub releases the SUB socket and its monitor; the next Recv opens them
// afresh.
func (f *feed) closeSub() error {
	if f.sub == nil {
		return nil
	}
	err := errors.Join(f.sub.Close(), f.monitor.Close())
	f.sub, f.monitor = nil, nil
	return err
}
