// Package index is the router's map of which vLLM engine holds which prefix
// blocks, built from KV events (package kvevents) and queried per request.
//
// # Keys
//
// Blocks are keyed by the router's own chained hash, never by vLLM's block
// hash: a BlockStored's token ids are cut into blocks and each key is
// BlockKey(parent key, TokenHash(tokens), ExtraHash(extra keys)), starting from
// RootKey(LoRA adapter). The router thus needs neither vLLM's hash algorithm
// nor PYTHONHASHSEED, and a request's prompt, tokenized the way vLLM does,
// gives the same keys through Keys. Each engine keeps an engine-hash ->
// own-key table: it resolves a BlockStored's parent and every BlockRemoved.
// A block whose parent hash is unknown is an orphan, kept by engine hash and
// token hash until its parent is stored, then linked with all its waiting
// descendants; it is never chained from the root, which would claim a prefix
// the engine may not hold. Token-less stores (offload tiers) are placed by
// engine hash alone.
//
// # Holders, tiers, speculation
//
// An Engine is a pod's data-parallel rank; up to MaxEngines (4,096) per
// Index, each given the lowest free slot. A key's holders are one word per
// tier (GPU in an open-addressing table, CPU and storage in maps that stay
// empty on GPU-only fleets): a bit per slot while the holders' slots lie in
// one group of 56, else a bitmap in the shard's arena. Fleets of up to 56
// engines never spill; on larger ones, routed by prefix, nearly every key
// has one holder and stays one word. A Lookup follows only the engines holding a prompt's first key,
// a few word operations per key and group of 56, and reports each engine's
// leading blocks on any tier and on GPU, without allocating. Speculative
// entries, written right after a routing decision, count as GPU holdings
// while the request waits at its engine (until its Hold settles, at the
// first response byte) and then until an event confirms them or
// SpeculationTTL passes.
//
// # Concurrency and bounds
//
// Keys are spread over 128 shards, each with its own RWMutex: writers lock
// one shard per block, readers read-lock one shard per key and never take a
// global lock. An engine's events apply under that engine's mutex, so engines
// apply in parallel. MaxKeys bounds memory: past it the engine holding most
// blocks loses random holdings until the index is 1/16 below the bound; this
// only ever under-reports. The block size is learned from events per engine
// and for the fleet; disagreements are counted.
//
// Measured figures live in BENCHMARKS.md at the repository root.
package index
