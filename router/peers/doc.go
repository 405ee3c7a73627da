// Package peers lets router replicas decide as one router would
// (DESIGN.md decision 10). Each replica subscribes to every engine and
// keeps its own index; what only one replica knows — the speculative
// entries its decisions wrote, held until the request's first byte, its
// in-flight requests and pending prefill tokens per pod, and, under the
// router's KV bound, each request's KV demand until it ends — it tells the
// others as it happens, over gRPC with frames of its own, batched every
// few milliseconds and in full every second.
//
// A decision never waits on a peer: news is queued under a short lock and
// a peer's stream is fed by its own goroutine, dropping what a slow peer
// cannot take (the next full batch heals it). A peer silent for
// SilentAfter, gone or partitioned is forgotten: the entries it held
// start their TTL and its loads drop out, leaving the replica deciding
// alone, as without peers. Every frame is bounded and validated before
// anything is allocated; a peer sending garbage is counted and cut off.
// Peers present a shared token when one is configured.
//
// A starting replica warms its index from a peer (Warm): each engine's
// blocks and the peer's place in the engine's event sequence, from which
// the ingestor follows the engine on (a replay of what came after, not of
// everything from seq 0). Without a peer it replays every pod from 0.
package peers
