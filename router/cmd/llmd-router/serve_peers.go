package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/peers"
)

// peerServer is the running exchange with the other router replicas.
type peerServer struct {
	x  *peers.Exchange
	g  *grpc.Server
	ln net.Listener
}

// startPeers starts the exchange when peers.listen is set: it hooks the
// picker and the fleet, serves the peers, follows the ones peer discovery
// reports and, before the fleet follows any pod, warms the index from the
// first that answers within peers.warm_start. Nil without peers. Peers
// present the admin token, when one is set.
func startPeers(ctx context.Context, cfg *config.Config, c *core, token, kubeconfig string, reg prometheus.Registerer,
	log *slog.Logger) (*peerServer, error) {
	p := cfg.Peers
	if p.Listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", p.Listen)
	if err != nil {
		return nil, fmt.Errorf("peers.listen %s: %w", p.Listen, err)
	}
	plog := log.With("component", "peers")
	x := peers.New(peers.Config{Index: c.index, Fleet: c.fleet, Ingestor: c.ingestor, DataParallelSize: cfg.Discovery.DataParallelSize,
		KV: c.server, Token: token, Waiting: func() int { return c.server.Waiting() },
		Work: func() int { return int(c.server.Work()) }, Logger: plog})
	if err := reg.Register(peers.Collector{Exchange: x}); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("registering peer metrics: %w", err)
	}
	c.picker.SetSharer(x)
	c.server.ShareKV(x)
	c.fleet.Watch(x.Changed)
	g := peers.NewServer(x)
	go func() { _ = g.Serve(ln) }()
	ps := &peerServer{x: x, g: g, ln: ln}

	first := make(chan []string, 1)
	report := func(addrs []string) {
		x.Sync(addrs)
		select {
		case first <- addrs:
		default:
		}
	}
	if err := runPeerSource(ctx, p, ln.Addr().(*net.TCPAddr).Port, kubeconfig, report, plog); err != nil {
		ps.stop()
		return nil, err
	}
	if p.WarmStart.Duration > 0 {
		wctx, cancel := context.WithTimeout(ctx, p.WarmStart.Duration)
		defer cancel()
		select {
		case addrs := <-first:
			if _, err := x.Warm(wctx, addrs); err != nil {
				plog.Info("no warm start from a peer: replaying every pod from seq 0", "err", err)
			}
		case <-wctx.Done():
			plog.Info("peer discovery gave no view in time: replaying every pod from seq 0", "waited", p.WarmStart.String())
		}
	}
	return ps, nil
}

// stop stops serving and following the peers.
func (ps *peerServer) stop() {
	if ps == nil {
		return
	}
	ps.x.Close()
	ps.g.Stop()
}

// runPeerSource reports the peers' addresses: the static list once, or the
// router's own ready pods as the API server reports them, each on port.
func runPeerSource(ctx context.Context, p config.Peers, port int, kubeconfig string, report func([]string), log *slog.Logger) error {
	if k := p.Kubernetes; k != nil {
		_, cs, err := kubeClient(kubeconfig)
		if err != nil {
			return err
		}
		src := &discovery.Kubernetes{Client: cs, Namespace: k.Namespace, Selector: k.Selector}
		go func() {
			for ctx.Err() == nil {
				err := src.Run(ctx, func(pods []discovery.Pod) {
					addrs := make([]string, len(pods))
					for i, pd := range pods {
						addrs[i] = net.JoinHostPort(pd.IP, strconv.Itoa(port))
					}
					report(addrs)
				})
				if ctx.Err() == nil {
					log.Warn("peer discovery stopped; retrying", "err", err)
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
			}
		}()
		return nil
	}
	report(p.Static)
	return nil
}
