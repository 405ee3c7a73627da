// Package bench is the A/B benchmark of routing policies: a load generator
// that mirrors `vllm bench serve` (PROTOCOLS.md section 5) and runs one
// workload through the Kubernetes baseline, simple placements and the
// router's scorer configurations on the simulated fleet of package sim,
// in virtual time or against live replicas behind a real router process.
// `llmd-router bench` is its command line, `make demo` its live run.
//
// # Client
//
// Datasets (Workload): prefix_repetition as vLLM's (num prefixes, prefix
// and suffix length, output length, prompts shuffled), zipf (prefix k
// drawn with probability ~ 1/(k+1)^s, default s = 1.1), none (every
// prompt fresh random tokens, as long as the others) and, live only,
// multi-turn (conversations: a system prompt of prefix-len tokens, then
// per turn a user message of suffix-len tokens; each turn is a streamed
// chat request carrying the whole conversation so far, the earlier
// replies as the replica streamed them, sent once the previous turn's
// reply is in, as agents send theirs; the router renders it with the
// model's chat template). Every request generates exactly output-len
// tokens (--ignore-eos).
//
// Prompts (--prompts) are text by default, built as vLLM's benchmark
// builds them (PROTOCOLS.md section 5): every prefix and suffix is random
// ids uniform in the vocabulary, decoded, re-encoded and padded or cut
// until its text re-encodes to exactly the asked length (at most 10
// rounds), and the prompt is the decoded text of prefix + suffix, so the
// router and the replicas tokenize every request. The client builds them
// with the model's tokenizer files (--tokenizer, which `make demo`
// fetches) before any clock starts. --prompts tokens sends the token ids
// instead (no tokenizer anywhere); virtual mode always runs token ids.
// --block-size is the replicas' KV block size (64, as the seed ran),
// given to the router as the provider gives it.
//
// Load: --max-concurrency keep-alive connections, --request-rate Poisson
// arrivals (0 = inf; multi-turn: conversation starts), --num-prompts,
// --seed. The summary (Summary, the
// JSON "policies" entries) has vLLM's figures (duration, request, output
// and total token throughput, mean/median/P99 TTFT, TPOT, ITL, E2EL; peak
// output throughput and ITL in live mode only, where single tokens are
// timed) plus what vLLM cannot see: the prompt-token prefix hit rate from
// the replicas' counters, the fleet's waiting-queue peak and mean KV use,
// each pod's request count, and in live mode each pod's requests,
// waiting, running and KV use over the run ("pods_over_time", sampled
// every second of simulated time).
//
// # Herding
//
// Every run gets a verdict ("herd", the table's "max pod / mean"): a run
// herds when one pod drew more than 1.5x the mean request count while
// another pod had spare KV (use below 90%) and no queue in at least 10%
// of the loaded samples in which the busiest pod had a queue
// (DetectHerding). Virtual mode, without samples, judges on the ratio.
//
// # Policies
//
//	rr      Kubernetes baseline: kube-proxy picks a random pod per connection,
//	        the client's keep-alive connection sends all its requests there
//	random  a uniformly random pod per request
//	approx  routing-history character-block affinity (the Gateway API
//	        Inference Extension's default prefix scorer, scoring.History)
//	        3 : kv-usage 2 : queue 2; it never sees the engines' caches
//	llmd    llm-d precise: prefix (KV-event index) 3 : kv-usage 2 : queue 2,
//	        max-score pick, speculative entries for 2 s
//	best    the challenger (BestScorers = config.BoundedLLMDScorers): the
//	        held-out tuning's winner, llmd's mix under a bounded-load cap,
//	        load-bound 10 (factor 1.5); the router's default stays llmd's
//	        mix until best beats it live on the seed workload
//	cand:N  tuning candidate N (TuningCandidates), for live tuning runs
//
// Virtual mode runs sim.RunVirtual with router/scoring's Picker behind a
// small adapter (adapter.go), so the scorers, index lookups and speculative
// entries are the live router's code, fed only by encoded KV events and
// 50 ms scrapes. The five runs go in parallel, each deterministic.
//
// Live mode runs each policy in turn on freshly started replicas (cold
// caches, counters from zero; HTTP, /metrics and KV events over ZeroMQ on
// free ports). rr and random are placed by the client itself, as a
// Service would place them without any router; approx, llmd and best go
// through a real `llmd-router serve` process (os.Executable, or --router)
// given the replicas as static pods, the policy's scorers, the block size
// (as the provider passes it) and the model's tokenizer files (without
// them the router does not know the model and routes on load alone).
// Times are reported in simulated seconds (wall x time scale), so they
// compare with virtual mode; the client's and the router's own latency is
// scaled by the same factor. A replica that falls behind its schedule
// by more than --max-lag (5%) of the run fails it: a starved CPU must not
// pass for a slow GPU. The report adds the router's own counters
// (decisions, KV-event messages and gaps, index keys).
//
// # make demo
//
// `make demo` runs live mode with --demo-scale: the seed workload (8
// replicas, 150 prefixes x 2,048 tokens, suffix 128, output 256, text
// prompts, block size 64, concurrency 512, rate inf) with 1,800 prompts
// instead of 9,000 (12 per prefix instead of 60) and the replicas at 2.5x
// real time. Fewer prompts per prefix lower the hit-rate ceiling (11 of 12
// prompts per prefix can hit 2,048 of 2,176 tokens: 86.3%) and make
// ramp-up and drain a larger share of the run. Live runs are not
// deterministic: the routed policies depend on how the opening burst of
// 512 requests, and each later wave, interleaves with the router's 50 ms
// scrapes and its speculative entries. The table is in README.md; the
// figures below are single runs of
//
//	llmd-router bench --mode live --demo-scale --policies rr,llmd,best \
//	  --tokenizer T/tokenizer.json --tokenizer-config T/tokenizer_config.json --json seed.json
//
// on 2 cores shared with other agents' builds (HEAVY_EXCLUSIVE: no other
// heavy job, but not an idle machine), 2 min 17 s to 4 min 32 s each:
//
//	run  rr tok/s  llmd           best (the default)  best P99 TTFT
//	1    2487      6287 (2.53x)   6192 (2.49x)        12.9 s (llmd 13.1 s)   cap without floor
//	2    2499      6706 (2.68x)   6222 (2.49x)        12.3 s (llmd 12.5 s)   cap with floor 16
//
// Neither herded (max pod / mean 1.06-1.09). On this workload llmd, when
// it does not herd, sits at the hit-rate ceiling (84.3% and 86.1%); the
// cap spills prefixes in the waves where every connection's next request
// arrives at once (a pod briefly holds 95-117 requests against a mean of
// 64), which costs best 2-3 points of hit rate (83.5%, 83.2%): the price
// of never herding. The collapse it prevents (0.74x rr, one pod at 393 of
// 1,800 requests) came in one of five earlier llmd runs.
//
// # Choosing the default (DESIGN.md decision 8)
//
// Why llmd herds. Under prefix 3 : kv-usage 2 : queue 2, a pod holding a
// request's prefix (32 of 34 blocks at block size 64: prefix score 0.94,
// 2.82 weighted) loses the request only when another pod beats it by more
// than that on load, and the queue scorer is min-max normalised: the
// longest queue scores 0 and the shortest 1 however long the queue is, so
// it is worth at most 2. The rest must come from kv-usage, which needs the
// other pod below 59% KV use (2 x (1 - 0.59) = 0.82). A pod that came to
// hold more than its share of prefixes (new prefixes of a burst placed on
// a scrape's view, duplicates made when a speculative entry expired before
// the pod's BlockStored arrived) therefore keeps every request for them
// while the others are busy, whatever its queue: in the collapsed demo run
// one pod drew 393 of 1,800 requests (about 33 prefixes x 12) while seven
// drew 177-215, P99 TTFT 235 s, 0.74x rr. The live series ("pods_over_time")
// of llmd's runs show the per-pod counts are multiples of 12 (prefix
// ownership, not per-request balance) and, on zipf (seed 2), its hottest
// pod at 1.65x the mean while others idled: a herd by the verdict above.
// The cost scorer (old `best`) spills a prefix once its holder has about
// four more queued requests than another pod (4 x 512 waiting tokens
// outweigh a 2,048-token prefill) but is blind to KV capacity and counts
// the queue, not its cache: with the cap as well it spilled more, and on
// long-6k, where prefixes overflow the caches, reached 23.5% hit rate
// against llmd's 36%.
//
// The fix bounds the cause: scorer load-bound (router/scoring) scores 0 for
// a pod that has reached ceil(factor x (in-flight total + 1) / pods) of the
// router's own in-flight requests (exact at decision time, unlike 50 ms
// scrapes), but never less than 16, 1 otherwise; weighted 10, above the other scorers together, it
// is a hard cap, and prefix affinity decides among the pods under it, so a
// hot prefix spills to a second pod instead of queueing behind one.
//
// Candidates (TuningCandidates): llm-d's mix, the old `best` (prefix 2 :
// cost 2 : in-flight 1), each with the cap at factor 1.5, and the virtual
// grid below. Held-out workloads, never the seed workload nor its seed:
// zipf (s = 1.1, seed 2), long-6k (6,144-token prefixes, seed 4) and
// multi-turn (128 conversations x 4 turns, system prompt 2,048, user
// message 128, output 256, seed 5), all text prompts at block size 64,
// live at --demo-scale (time scale 2.5; 1,800, 900 and 512 prompts):
//
//	llmd-router bench --mode live --demo-scale --dataset zipf --seed 2 --policies P ...
//	llmd-router bench --mode live --demo-scale --seed 4 --prefix-repetition-prefix-len 6144 --num-prompts 4500 --policies P ...
//	llmd-router bench --mode live --demo-scale --dataset multi-turn --seed 5 --num-prompts 2560 \
//	  --prefix-repetition-num-prefixes 128 --policies P ...
//
// with P = llmd,best,cand:llmd+bound1.5,cand:prefix+cost+inflight+bound1.5
// (best then still prefix 2 : cost 2 : in-flight 1) and --tokenizer,
// --tokenizer-config as `make demo` passes them. One run each (the machine
// was shared with other agents' builds and tests then); output tok/s, max
// pod / mean in brackets, score = geometric mean over the workloads of
// throughput relative to the best candidate there, a herding candidate
// disqualified:
//
//	candidate                        zipf          long-6k       multi-turn    score
//	llmd                             6252 (1.65 HERD) 897 (1.23)  2265 (1.00)  herds
//	prefix 2 cost 2 in-flight 1      6240 (1.14)    881 (1.09)   2227 (1.00)   0.936
//	llmd + load-bound 1.5            6132 (1.11)   1029 (1.10)   2229 (1.12)   0.980  <- best
//	prefix 2 cost 2 in-flight 1
//	  + load-bound 1.5               6415 (1.20)    816 (1.14)   2122 (1.05)   0.906
//
// On long-6k (an overload: 6k prompts, 512 connections) requests waited
// longer than the router's 30 s response-header timeout, which the
// simulated replica only answers with its first token: llmd lost 11,
// prefix+cost+in-flight 68, with the cap 0 and 121 requests to 502s. A
// tighter cap (factor 1.25) cost hit rate on the seed-shaped demo run
// (79.8% against llmd's 86.0%, the workload's ceiling being 86.3%): spills
// recompute prefixes, so the cap must bite only on real imbalance.
//
// Two variants of the cap were tried after the table above: a floor of 16
// (min_in_flight) so that the bound, ceil(1.5 x 1 / 8) = 1 at a burst's
// first request, never spills a prefix's second request (kept: zipf seed
// 2 then gave best 6529 tok/s, max pod 1.21x, against llmd's 6446 and a
// herd at 1.81x), and a gate capping a pod only while its KV use was at
// least 90% (dropped: zipf herded, 1.64x the mean, and the demo workload
// fell to 5591 tok/s against llmd's 6623 in the same run).
//
// Judged live on the seed workload (5 consecutive `make demo` runs on an
// otherwise idle machine, 2026-12-01, table in BENCHMARKS.md and README):
// best 2.01-2.42x rr (mean 2.23x), llmd 2.25-2.56x (mean 2.46x); best lost
// to llmd in 4 of 5 runs and in the run before them, with 2-8 points less
// hit rate (its cap spills prefixes in the waves where all 512 connections
// send at once). So the router's default stays llm-d's mix. The cap does
// what it was built for (no herd on zipf), but at a price on the seed
// workload that the tuning runs, taken on a loaded machine, did not show.
//
// The virtual-time grid (BenchmarkTuneBest) cannot tell these apart: its
// opening burst is decided on one idle scrape, so nothing herds there, and
// it checks only that best scores within 2% of its winner:
//
//	go test -run '^$' -bench TuneBest -benchtime 1x -v ./internal/bench/
//
// (85 s on 2 shared cores; token ids, block size 16, 9,000 prompts each;
// output tok/s, score as above; candidates not shown are within the same
// spread):
//
//	candidate                            long-6k  none   zipf   score
//	llmd                                 1044     2369   7965   0.9904
//	prefix 2 cost 2 in-flight 1          1050     2369   8121   0.9987  (virtual winner)
//	prefix 2 cost 2 in-flight 1 cap 1.5  1050     2369   8047   0.9957
//	llmd cap 1.25                        1044     2369   7754   0.9816
//	llmd cap 1.5 (the default)           1044     2369   8011   0.9923
//
// # Measured (Go 1.26, 2 vCPUs shared with other builds)
//
// Virtual mode still runs the simulator's engine at block size 16 with
// token ids (runVirtualPolicy), and `best` below is the old prefix 2 :
// cost 2 : in-flight 1: these figures predate the text prompts, block
// size 64 and the new default.
//
// Full seed workload, virtual mode, all five policies, 19 s of wall time:
//
//	llmd-router bench --mode virtual --json seed.json --plot seed.svg
//
//	| policy | duration s | output tok/s | vs rr | mean TTFT ms | P99 TTFT ms | hit rate | preemptions |
//	| rr     | 828.4 | 2781 | 1.00x | 19075 | 37371 | 24.7% | 1742 |
//	| random | 850.7 | 2708 | 0.97x | 20348 | 47901 | 23.3% | 1592 |
//	| approx | 277.2 | 8313 | 2.99x |   541 | 10033 | 92.3% |    0 |
//	| llmd   | 276.0 | 8349 | 3.00x |   537 | 10033 | 92.5% |    0 |
//	| best   | 274.8 | 8383 | 3.01x |   534 | 10963 | 92.5% |   12 |
//
// Goals: best/rr = 3.01 (goal >= 2.6: met); best/llmd = 1.004 (goal >=
// 1.10: not met). On this workload llmd is already at the ceiling: its hit
// rate (92.5%) is the most the workload allows (59 of 60 prompts per
// prefix find it, 2,048 of 2,176 tokens: 92.6%), and no pod preempts. By
// package sim's cost model a pod decoding 64 sequences of ~2,300 tokens is
// memory-bound at about 54 ms a step (15.2 GB weights + 8.4 GB of KV read
// at 600 GB/s, plus 15 ms), i.e. ~1,180 tok/s, ~9,400 tok/s for 8 pods
// before any prefill; 1.10x llmd would be 9,184 tok/s, so no scorer can
// reach it on this simulator while every suffix still needs its prefill.
//
// No shared prefix (goal: best within 3% of rr), 54 s of wall time:
//
//	llmd-router bench --mode virtual --dataset none --json none.json
//
//	rr 2350 tok/s, random 2286, approx 2369, llmd 2369, best 2369 (+0.8% over rr: met)
//
// # Rate ladder
//
// `llmd-router bench --ladder 20,40,60` runs the policies at each request
// rate in turn (virtual or live) and prints BENCHMARK.md's ladder table
// per policy (achieved req/s, output tok/s, mean and P99 TTFT, mean
// TPOT); the JSON has one report per rate. Each step sends rate x 20
// prompts with Poisson arrivals on as many connections (no concurrency
// cap): what the seed's ladder figures imply (sim.LadderSeconds).
//
// # Live against virtual
//
// Virtual mode models the live router's information lag (RouterLag,
// LiveLag): metric scrapes every 50 ms, KV events 10 ms after their step,
// speculative entries living 2 s, in-flight counts exact (up at the
// decision, down when the response ends), and the router's processing
// time per request, spent in arrival order, so that the opening burst of a
// rate-inf run is decided one request after another, each on what the
// router knows by then, as live. Each is a wall-clock delay, so with
// --demo-scale (replicas at 2.5x real time) virtual mode stretches them
// by 2.5 in simulated time, as the live run experiences them. rr and
// random run without a router and pay no router time. The per-request
// cost is measured (BENCHMARKS.md): the router's own overhead histogram
// in a live demo run, on this 2-core machine where client, replicas and
// router share the CPU; it includes tokenizing the text prompts.
package bench
