package peers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// WarmStart is how a replica's index was warmed from a peer.
type WarmStart struct {
	Peer    string // the peer's address
	Engines int    // engines imported, each followed on from the peer's place
	Blocks  int
	Took    time.Duration
}

// Warm fills the index from the first peer of addrs that hands over its
// own (DESIGN.md decision 6): each engine's blocks and its place in the
// engine's event sequence, from which the ingestor then follows it instead
// of replaying it from seq 0. Call it before the fleet follows any pod. It
// fails when no peer answered within ctx, leaving the index as it was:
// every pod is then replayed from seq 0, as without peers.
func (x *Exchange) Warm(ctx context.Context, addrs []string) (WarmStart, error) {
	var errs []error
	for _, a := range addrs {
		start := time.Now()
		w, err := x.warmFrom(ctx, a)
		if err == nil {
			w.Took = time.Since(start)
			x.cfg.Logger.Info("index warmed from a peer", "peer", a, "engines", w.Engines, "blocks", w.Blocks, "took", w.Took.String())
			go x.dropStrays(w.pods)
			return w.WarmStart, nil
		}
		if !isSelf(err) {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return WarmStart{}, errors.New("no peer to warm the index from")
	}
	return WarmStart{}, errors.Join(errs...)
}

// warmed is a WarmStart with the pods it imported.
type warmed struct {
	WarmStart
	pods map[string]bool
}

// warmFrom takes peer a's snapshot. On failure what it imported is
// dropped again.
func (x *Exchange) warmFrom(ctx context.Context, a string) (w warmed, err error) {
	w = warmed{WarmStart: WarmStart{Peer: a}, pods: make(map[string]bool)}
	defer func() {
		if err != nil {
			for pod := range w.pods {
				x.cfg.Index.DropPod(pod)
			}
		}
	}()
	cc, err := dial(a)
	if err != nil {
		return w, err
	}
	defer cc.Close()
	cs, err := x.open(ctx, cc, methodSnapshot, false)
	if err != nil {
		return w, err
	}
	var positions []kvevents.Position
	var cur *chunk
	var snap index.EngineSnapshot
	var fr frame
	for {
		if err := cs.RecvMsg(&fr); err != nil {
			return w, err
		}
		if len(fr.b) == 1 && fr.b[0] == kindSnapDone {
			if cur != nil {
				return w, fmt.Errorf("%w: snapshot ended inside engine %s", errMalformed, cur.Pod)
			}
			x.cfg.Ingestor.Resume(positions)
			return w, nil
		}
		c, err := decodeChunk(fr.b)
		if err != nil {
			x.c.rejected("malformed")
			return w, err
		}
		if cur != nil && (c.Pod != cur.Pod || c.Rank != cur.Rank) {
			return w, fmt.Errorf("%w: engine %s rank %d began inside %s rank %d", errMalformed, c.Pod, c.Rank, cur.Pod, cur.Rank)
		}
		if cur == nil {
			cur, snap = &c, index.EngineSnapshot{BlockSize: c.BlockSize}
		}
		for _, b := range c.Blocks {
			snap.Blocks = append(snap.Blocks, index.Block{Hash: b.Hash, Key: b.Key, Tiers: b.Tiers})
		}
		if !c.Last {
			continue
		}
		if err := x.cfg.Index.Import(index.Engine{Pod: cur.Pod, Rank: cur.Rank}, snap); err != nil {
			return w, err
		}
		w.pods[cur.Pod] = true
		w.Engines++
		w.Blocks += len(snap.Blocks)
		positions = append(positions, kvevents.Position{Pod: cur.Pod, Addr: cur.Addr, Rank: cur.Rank, Next: cur.Next, LastTS: cur.LastTS})
		cur = nil
	}
}

// dropStrays drops the imported pods the fleet does not have once it has
// its first view: they left between the peer's snapshot and this replica's
// start, and no removal would ever reach them.
func (x *Exchange) dropStrays(pods map[string]bool) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !x.cfg.Fleet.Synced() {
		select {
		case <-x.out.done:
			return
		case <-tick.C:
		}
	}
	have := make(map[string]bool)
	for _, p := range x.cfg.Fleet.PodNames(nil) {
		have[p] = true
	}
	for pod := range pods {
		if !have[pod] {
			x.cfg.Index.DropPod(pod)
		}
	}
}
