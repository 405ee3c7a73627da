package zmqtransport

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"

	"github.com/llmd-dev/terraform-provider-llmd/internal/freeport"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// simEvent is an event as a test engine emits it, in the JSON shape the
// Python publisher reads.
type simEvent struct {
	Type        string   `json:"type"`
	BlockHashes []uint64 `json:"block_hashes,omitempty"`
	Parent      *uint64  `json:"parent_block_hash"`
	TokenIDs    []uint32 `json:"token_ids,omitempty"`
	BlockSize   int      `json:"block_size,omitempty"`
	Medium      string   `json:"medium,omitempty"`
}

func (e simEvent) event() kvevents.Event {
	ev := kvevents.Event{BlockHashes: e.BlockHashes, TokenIDs: e.TokenIDs, BlockSize: e.BlockSize, Medium: e.Medium}
	switch e.Type {
	case "BlockStored":
		ev.Kind = kvevents.BlockStored
	case "BlockRemoved":
		ev.Kind = kvevents.BlockRemoved
	case "AllBlocksCleared":
		ev.Kind = kvevents.AllBlocksCleared
	}
	if e.Parent != nil {
		ev.ParentHash, ev.HasParent = *e.Parent, true
	}
	return ev
}

// publisher is one test engine's ZMQ side: PUB plus replay ROUTER.
type publisher interface {
	// endpoint is how the router reaches it.
	endpoint() kvevents.Endpoint
	// publish sends one batch (keeping it for replay); drop keeps it for
	// replay only, as a PUB past its high-water mark loses it.
	publish(t testing.TB, events []simEvent, drop bool)
	// restart starts a new engine process: seq 0, nothing kept.
	restart(t testing.TB)
}

// pubOptions configure either kind of publisher.
type pubOptions struct {
	form   kvevents.Form
	rank   int // -1: legacy batches without a rank
	buffer int // messages kept for replay
	bind   bool
	// replayTopic makes the Python publisher's replay replies carry the topic
	// frame (["", topic, seq, payload]) some vLLM versions send.
	replayTopic bool
}

// freeAddr returns a tcp address on a free loopback port, for the side that
// binds a known address (the router's SUB in bind mode). The publisher
// connects first and ZeroMQ retries its connect until the bind, each try
// from a port of the kernel's ephemeral range: a port from that range (as a
// listen on port 0 picks) can be taken by one of those tries, or by any
// other connection, before the bind (seen as "address already in use" in
// TestIngestMatchesPublishersTruth), so the port lies below it
// (freeport).
func freeAddr(t testing.TB) string {
	t.Helper()
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("tcp://127.0.0.1:%d", port)
}

// goPub publishes with kvevents.EncodeBatch over pebbe/zmq4.
type goPub struct {
	opt    pubOptions
	ep     kvevents.Endpoint
	mu     sync.Mutex
	pub    *zmq.Socket
	seq    uint64
	lastTS float64
	kept   []Kept
	stop   chan struct{}
	done   chan struct{}
}

func newGoPub(t testing.TB, opt pubOptions) *goPub {
	t.Helper()
	p := &goPub{opt: opt, stop: make(chan struct{}), done: make(chan struct{})}
	pub := must(zmq.NewSocket(zmq.PUB))(t)
	check(t, pub.SetLinger(0), pub.SetSndhwm(100000))
	if opt.bind {
		p.ep.Addr, p.ep.Bind = freeAddr(t), true
		check(t, pub.Connect(p.ep.Addr))
	} else {
		check(t, pub.Bind("tcp://127.0.0.1:*"))
		p.ep.Addr = must(pub.GetLastEndpoint())(t)
	}
	p.pub = pub
	router := must(zmq.NewSocket(zmq.ROUTER))(t)
	check(t, router.SetLinger(0), router.Bind("tcp://127.0.0.1:*"))
	p.ep.ReplayAddr = must(router.GetLastEndpoint())(t)
	go func() {
		defer close(p.done)
		ServeReplay(router, p.stop, p.keptFrom)
	}()
	t.Cleanup(func() {
		close(p.stop)
		<-p.done
		p.mu.Lock()
		p.pub.Close()
		p.mu.Unlock()
	})
	return p
}

func (p *goPub) endpoint() kvevents.Endpoint { return p.ep }

func (p *goPub) publish(t testing.TB, events []simEvent, drop bool) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	ts := math.Max(float64(time.Now().UnixNano())/1e9, p.lastTS+1e-6)
	p.lastTS = ts
	b := kvevents.Batch{TS: ts}
	if p.opt.rank >= 0 {
		b.DPRank, b.HasDPRank = p.opt.rank, true
	}
	for _, e := range events {
		b.Events = append(b.Events, e.event())
	}
	payload, err := kvevents.EncodeBatch(p.opt.form, &b)
	if err != nil {
		t.Fatal(err)
	}
	p.send(t, payload, drop)
}

// publishRaw sends payload as the next message, whatever it holds.
func (p *goPub) publishRaw(t testing.TB, payload []byte) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.send(t, payload, false)
}

// send numbers, keeps and (unless dropped) sends a payload; callers hold p.mu.
func (p *goPub) send(t testing.TB, payload []byte, drop bool) {
	t.Helper()
	seq := p.seq
	p.seq++
	p.kept = append(p.kept, Kept{Seq: seq, Payload: payload})
	if len(p.kept) > p.opt.buffer {
		p.kept = p.kept[1:]
	}
	if !drop {
		if _, err := p.pub.SendMessage("kv@test", binary.BigEndian.AppendUint64(nil, seq), payload); err != nil {
			t.Fatal(err)
		}
	}
}

func (p *goPub) restart(testing.TB) {
	p.mu.Lock()
	p.seq, p.kept = 0, nil
	p.mu.Unlock()
}

// reopen is a restart as a new process does it: the PUB socket closes and a
// new one binds the same address, so subscribers disconnect and reconnect.
func (p *goPub) reopen(t testing.TB) {
	t.Helper()
	if p.opt.bind {
		t.Fatal("reopen binds the publisher's own address")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pub.Close()
	pub := must(zmq.NewSocket(zmq.PUB))(t)
	check(t, pub.SetLinger(0), pub.SetSndhwm(100000))
	for deadline := time.Now().Add(5 * time.Second); pub.Bind(p.ep.Addr) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("cannot rebind %s", p.ep.Addr)
		}
	}
	p.pub, p.seq, p.kept = pub, 0, nil
}

// keptFrom returns the kept messages from start on.
func (p *goPub) keptFrom(start uint64) []Kept {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Kept
	for _, k := range p.kept {
		if k.Seq >= start {
			out = append(out, k)
		}
	}
	return out
}

// pyPub drives testdata/publisher.py: pyzmq sockets, python3-msgpack encoding.
type pyPub struct {
	ep  kvevents.Endpoint
	in  io.WriteCloser
	out *bufio.Reader
}

func newPyPub(t testing.TB, opt pubOptions) *pyPub {
	t.Helper()
	py := testenv.Python(t, "msgpack", "zmq")
	args := []string{"../testdata/publisher.py", "--form", opt.form.String(), "--buffer", fmt.Sprint(opt.buffer)}
	if opt.rank >= 0 {
		args = append(args, "--rank", fmt.Sprint(opt.rank))
	}
	if opt.replayTopic {
		args = append(args, "--replay-topic")
	}
	p := &pyPub{}
	if opt.bind {
		p.ep.Addr, p.ep.Bind = freeAddr(t), true
		args = append(args, "--connect", p.ep.Addr)
	}
	cmd := exec.Command(py, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives a killed test binary
	cmd.Stderr = os.Stderr
	in := must(cmd.StdinPipe())(t)
	out := must(cmd.StdoutPipe())(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	p.in, p.out = in, bufio.NewReader(out)
	var addrs struct{ Pub, Replay string }
	line := must(p.out.ReadBytes('\n'))(t)
	if err := json.Unmarshal(line, &addrs); err != nil {
		t.Fatalf("publisher.py said %q: %v", line, err)
	}
	if !opt.bind {
		p.ep.Addr = addrs.Pub
	}
	p.ep.ReplayAddr = addrs.Replay
	return p
}

func (p *pyPub) endpoint() kvevents.Endpoint { return p.ep }

func (p *pyPub) command(t testing.TB, cmd any) {
	t.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		t.Fatalf("publisher.py: %v", err)
	}
	if line, err := p.out.ReadString('\n'); err != nil || line != "ok\n" {
		t.Fatalf("publisher.py answered %q, %v", line, err)
	}
}

func (p *pyPub) publish(t testing.TB, events []simEvent, drop bool) {
	t.Helper()
	p.command(t, map[string]any{"op": "publish", "events": events, "drop": drop})
}

func (p *pyPub) restart(t testing.TB) { p.command(t, map[string]any{"op": "restart"}) }

func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func check(t testing.TB, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
