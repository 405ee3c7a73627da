// Package scoring decides which pod serves a request: scorers rate every
// candidate in [0, 1], the Picker adds them up with configured weights and
// takes the largest sum, then writes speculative index entries for the
// chosen pod so the next request with the same prefix follows it before
// the pod's BlockStored events arrive (DESIGN.md decisions 3, 4 and 6).
//
// # Scorers
//
// Each lives in its own file with its type constant, constructor, documented
// parameters and a compile-time check that it implements Scorer:
//
//	prefix     leading blocks held (KV-event index, speculation), by tier   prefix.go
//	queue      engine's waiting requests, min-max                          queue.go
//	in-flight  router's own unfinished requests per pod, min-max           inflight.go
//	kv-usage   1 - KV-cache utilisation                                    kvusage.go
//	spread     least recently chosen pod, for requests no pod has cached   spread.go
//	rendezvous one pod every router replica computes alike (rendezvous
//	           hash of the first block key), for requests no pod has
//	           cached                                                      rendezvous.go
//	cost       estimated time to first token from uncached prefill,
//	           queue and running batch                                     cost.go
//	history    routing-history character-block affinity (GIE's default),
//	           the benchmark's "approx" baseline                           history.go
//	load-bound 0 for pods at max(ceil(factor x mean+), min_in_flight)
//	           of the router's in-flight requests, else 1:
//	           bounded-load spill, a hard bound when weighted above
//	           the others together                                         loadbound.go
//
// FromConfig builds them from router/config, naming the key in every error.
// With data-parallel pods (SetDataParallelSize) a pod's hit is its best
// rank's and the Decision names that rank, or, for a prefix no rank holds,
// the pod's ranks in turn.
//
// The router's default (config.DefaultScorers = config.CostAwareScorers) is
// prefix 2 : cost 2 : in-flight 1 : rendezvous 1 under load-bound 10 at
// factor 1.75: every input is the router's own count (pending prefill,
// in-flight requests), exact at decision time, or, for rendezvous, the
// prompt and the pod names alone, which every replica shares. The llm-d precise configuration is prefix 3 :
// kv-usage 2 : queue 2 (config.LLMDScorers); both keep speculative entries
// for 2 s (index.Config).
//
// # Requests
//
// A Prompter turns a request body into token ids (Request); package
// prompt's Chat does it for the whole OpenAI surface through package chat
// (templates, request normalisation, LoRA adapters). A request that cannot
// be tokenized
// still routes, on load alone (prefix and spread see no blocks), and is
// counted in Stats.Untokenizable.
//
// # Users
//
// The live router calls Pick with the pods and loads package discovery
// tracks; the virtual-time simulator calls it with the loads its View holds,
// through an adapter to sim.Picker (sim_test.go here; internal/bench keeps
// its own, since router packages cannot import the simulator).
// Explain answers the same question without committing anything, for the
// /v1/route endpoint. The package is cgo-free (TestImportBoundaries).
//
// Measured figures live in BENCHMARKS.md at the repository root.
package scoring
