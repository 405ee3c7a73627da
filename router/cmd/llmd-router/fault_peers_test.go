package main

import (
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
)

// The peer rows of the fault suite: routers a and b exchange decisions
// over four replicas, both under load; the fault hits b, or a peer that
// sends garbage, and the row is a's: requests a failed (none may), streams
// it broke, how long until it follows b again, and its index against the
// engines' caches after a quiet period.
func peerFault(t *testing.T, fault string, garbage bool, hold time.Duration, inject func(b *router) (recover func()), check func(a *router)) faultRow {
	const pods, workers = 4, 6
	row := faultRow{group: "peers", fault: fault, eject: "-", recover: "-"}
	infos, _ := startReplicas(t, pods, "--time-scale", "10")
	addrs := peerAddrs(t, 2)
	cfg := faultConfig(t, "kv@")
	aPeers := addrs
	if garbage {
		aPeers = append([]string{garbagePeer(t)}, addrs...)
	}
	a := startRouter(t, infos, "--config", cfg, "--peers-listen", addrs[0], "--peers", strings.Join(aPeers, ","))
	b := startRouter(t, infos, withPeers(addrs, 1, "--config", cfg)...)
	waitFor(t, "a and b following each other", func() bool {
		return a.gauge(t, "llmd_router_peers") == 1 && b.gauge(t, "llmd_router_peers") == 1
	})
	ga := startLoad(t, func() string { return a.url }, workers)
	gb := startLoad(t, func() string { return b.url }, workers)
	time.Sleep(time.Second)
	recoverFn := inject(b)
	time.Sleep(hold)
	if recoverFn != nil {
		recovered := time.Now()
		recoverFn()
		row.recover = waitSeconds(recovered, 10*time.Second, func() bool { return a.gauge(t, "llmd_router_peers") == 1 })
	}
	time.Sleep(time.Second)
	ga.stop()
	gb.stop()
	ga.tally(&row)
	select {
	case <-a.done:
		t.Fatalf("router a exited: %v", a.err)
	default:
	}
	if row.failedBefore+row.brokeMidStream > 0 {
		t.Errorf("%s: a failed %d requests before streaming and broke %d", fault, row.failedBefore, row.brokeMidStream)
	}
	row.agreement = agreement(t, a, infos)
	if check != nil {
		check(a)
	}
	return row
}

// silentAfter is the router's default peers' silence limit (peers.Config).
const silentAfter = 3 * time.Second

// lost expects a to have counted its peer lost.
func lost(t *testing.T) func(a *router) {
	return func(a *router) {
		if n := a.gauge(t, "llmd_router_peer_lost_total"); n < 1 {
			t.Errorf("a counted %v peers lost, want at least 1", n)
		}
	}
}

// rawCodec passes frames as bytes: the garbage peer speaks the peer
// service's methods without the product's frame codec.
type rawCodec struct{}

func (rawCodec) Name() string                  { return "raw" }
func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}

var _ encoding.Codec = rawCodec{}

// garbagePeer serves the peer service's Follow with a frame that is no
// batch on every stream, as a peer of another build, a corrupted one or an
// attacker would.
func garbagePeer(t *testing.T) string {
	t.Helper()
	g := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	g.RegisterService(&grpc.ServiceDesc{ServiceName: "llmd.router.peer.v1.Peer", HandlerType: (*any)(nil), Streams: []grpc.StreamDesc{{
		StreamName: "Follow", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			var hello []byte
			if err := ss.RecvMsg(&hello); err != nil {
				return err
			}
			junk := []byte("B\x05junk!\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")
			if err := ss.SendMsg(&junk); err != nil {
				return err
			}
			<-ss.Context().Done()
			return nil
		}}}}, struct{}{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

// peerFaults are the peer rows, run by TestFaultSuite.
func peerFaults(t *testing.T, add func(faultRow)) {
	t.Run("peers/peer SIGKILL mid-run", func(t *testing.T) {
		add(peerFault(t, "peer SIGKILL mid-run", false, 2*time.Second, func(b *router) func() {
			_ = b.cmd.Process.Signal(syscall.SIGKILL)
			return nil
		}, lost(t)))
	})
	t.Run("peers/peer partitioned", func(t *testing.T) {
		// A stopped process keeps its connections open and sends nothing:
		// to its peers, a partition. It outlasts the silence limit, so a
		// decides alone, then follows b again.
		add(peerFault(t, "peer partitioned (SIGSTOP 4 s)", false, silentAfter+time.Second, func(b *router) func() {
			_ = b.cmd.Process.Signal(syscall.SIGSTOP)
			return func() { _ = b.cmd.Process.Signal(syscall.SIGCONT) }
		}, lost(t)))
	})
	t.Run("peers/peer slowed", func(t *testing.T) {
		add(peerFault(t, "peer slowed (stopped 80% of 2 s)", false, 2*time.Second, func(b *router) func() {
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					_ = b.cmd.Process.Signal(syscall.SIGSTOP)
					time.Sleep(80 * time.Millisecond)
					_ = b.cmd.Process.Signal(syscall.SIGCONT)
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()
			return func() { close(stop); <-done }
		}, nil))
	})
	t.Run("peers/malformed peer", func(t *testing.T) {
		add(peerFault(t, "malformed peer beside b", true, 2*time.Second, func(*router) func() { return nil }, func(a *router) {
			if n := a.gauge(t, "llmd_router_peer_cut_offs_total"); n != 1 {
				t.Errorf("a cut the garbage peer off %v times, want 1 (it stays cut off for 30 s)", n)
			}
			if n := a.gauge(t, "llmd_router_peer_rejected_total", "reason", "malformed"); n != 1 {
				t.Errorf("a refused %v malformed frames, want 1", n)
			}
		}))
	})
}
