package peers

import (
	"google.golang.org/grpc"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// serveFollow streams this replica's batches to one peer until it goes.
func (x *Exchange) serveFollow(ss grpc.ServerStream) error {
	if _, err := x.accept(ss); err != nil {
		return err
	}
	sub := x.out.subscribe()
	defer x.out.unsubscribe(sub)
	// A replica starting beside this one follows it first: the follower of
	// it that a refused connection left waiting need not wait out its
	// backoff, or this replica's first decisions would reach no one.
	x.mu.Lock()
	for _, f := range x.followers {
		f.retryNow()
	}
	x.mu.Unlock()
	for {
		select {
		case <-ss.Context().Done():
			return nil
		case <-x.out.done:
			return nil
		case b := <-sub.frames:
			if err := ss.SendMsg(&frame{b: b}); err != nil {
				return err
			}
		}
	}
}

// serveSnapshot streams this replica's index to a starting peer: each
// followed engine's place in its event sequence, read first, then its
// blocks (events applied in between are applied again by the peer from
// that place, which is harmless), in chunks.
func (x *Exchange) serveSnapshot(ss grpc.ServerStream) error {
	if _, err := x.accept(ss); err != nil {
		return err
	}
	for _, p := range x.cfg.Ingestor.Positions() {
		snap, ok := x.cfg.Index.Export(index.Engine{Pod: p.Pod, Rank: p.Rank})
		if !ok {
			continue
		}
		c := chunk{Pod: p.Pod, Addr: p.Addr, Rank: p.Rank, Next: p.Next, LastTS: p.LastTS, BlockSize: snap.BlockSize}
		blocks := snap.Blocks
		for {
			n := min(len(blocks), chunkBlocks)
			c.Blocks = c.Blocks[:0]
			for _, b := range blocks[:n] {
				c.Blocks = append(c.Blocks, block{Hash: b.Hash, Key: b.Key, Tiers: b.Tiers})
			}
			blocks = blocks[n:]
			c.Last = len(blocks) == 0
			// A fresh buffer each time: gRPC may still be sending the last.
			if err := ss.SendMsg(&frame{b: c.encode(nil)}); err != nil {
				return err
			}
			if c.Last {
				break
			}
		}
	}
	return ss.SendMsg(&frame{b: []byte{kindSnapDone}})
}
