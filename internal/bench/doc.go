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
// # Priority classes under overload (--priority-mix, --router-arg)
//
// --priority-mix high=0.2,low=0.8 names a priority class in each request's
// x-llmd-priority header, drawn per request number from --seed with the
// given shares (the router's class names; default none: no header, the
// router's default class). --router-arg adds one argument to every
// `llmd-router serve` the bench starts (repeatable): flow control holds
// requests only under a cap or a pending bound,
// --router-arg=--max-in-flight-per-pod=N, --router-arg=--max-pending-per-pod=N
// (what llmd_prefix_router deploys by default: the fleet's max_num_seqs
// and 2). A
// request refused with 429 or 503 (the router's admission) is shed, not
// failed, and the run goes on; a request with no answer (a transport error
// or a stream cut short) is lost. With a mix the table gains one row per
// policy and class ("classes" in the JSON): requests sent, served, shed
// with 429 and with 503 (and how many of those carried Retry-After),
// failed, lost, and the served requests' mean and P99 TTFT. The router's
// time-to-live (--queue-timeout) is wall-clock time: at --demo-scale's
// 2.5x, --router-arg=--queue-timeout=12s is 30 s of simulated time.
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
//	best    the cost-aware mix, the router's default (BestScorers =
//	        config.CostAwareScorers): prefix 2 : cost 2 : in-flight 1 :
//	        rendezvous 1 under load-bound 10 at factor 1.75, the winner
//	        of the live tuning on held-out workloads, then of the seed
//	        workload; rendezvous 1 was added for two routers, chosen on
//	        held-out workloads behind one and two (BENCHMARKS.md)
//	cand:N  tuning candidate N (TuningCandidates), for live tuning runs
//
// Virtual mode runs sim.RunVirtual with router/scoring's Picker behind a
// small adapter (adapter.go), so the scorers, index lookups and speculative
// entries are the live router's code, fed only by encoded KV events and
// 50 ms scrapes. The runs go in parallel, each deterministic.
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
// scrapes and its speculative entries. The table is in README.md, every
// run behind it in BENCHMARKS.md.
//
// # Choosing the default (DESIGN.md decision 8)
//
// Why a policy collapses. The opening burst sends 512 requests within
// about half a second; the router decides them one after another, about
// 1 ms each. A scorer that reads a scrape (kv-usage, queue) sees the same
// 50 ms-old numbers for ~20 decisions in a row, so every new prefix among
// them goes to the pod that looked emptiest, and prefix affinity then
// keeps all of that prefix's later requests there. Under llm-d's prefix 3
// : kv-usage 2 : queue 2 a pod holding a request's prefix (32 of 34
// blocks: 2.82 weighted) loses it only to a pod below 59% KV use, the
// queue scorer being min-max normalised (worth at most 2 however long the
// queue). So a pod that drew more than its share of the burst's prefixes
// keeps them while its KV cache fills and its queue grows, and the others
// empty: one pod at 177 of the first 512 requests, P99 TTFT 91 s, 1.51x
// rr; with a herd, 0.74x. A long queue used to delay that pod's
// BlockStored past the 2 s speculative TTL, so the next request of a
// queued prefix found no holder and computed it again, which fed the
// collapse (the report's speculation_expired doubled in such runs). Since
// f884429 a speculative entry stands until its request's first byte and
// only then starts the TTL: no entry expires in a demo run any more.
//
// The fix reads only the router's own counts, exact at decision time:
// the in-flight count starts inside the decision (the proxy's admission),
// the pending prefill of each pod (uncached prompt tokens of the router's
// requests that have not answered a byte, Load.PendingTokens) is what the
// cost scorer weighs as the queue ahead of the request, and load-bound
// caps a pod at 1.75x the mean of the router's in-flight requests, so a
// hot prefix spills to a second pod instead of queueing behind one (the
// pending-aware cost mix without the cap herded on zipf: a streaming
// request is no queue, so nothing moved a hot prefix). Candidates were
// tuned live on held-out workloads and seeds, never the seed workload:
//
//	llmd-router bench --mode live --demo-scale --dataset zipf --seed 2 --policies P ...
//	llmd-router bench --mode live --demo-scale --seed 4 --prefix-repetition-prefix-len 6144 --num-prompts 4500 --policies P ...
//	llmd-router bench --mode live --demo-scale --dataset multi-turn --seed 5 --num-prompts 2560 \
//	  --prefix-repetition-num-prefixes 128 --policies P ...
//
// with P the candidates as cand:NAME (TuningCandidates) and --tokenizer,
// --tokenizer-config as `make demo` passes them; a candidate that herds
// on any of them is out. The virtual-time grid (BenchmarkTuneBest, or
// `--mode virtual --demo-scale` on the same workloads) models the same
// router lag and screens candidates in seconds; live runs decide.
//
//	go test -run '^$' -bench TuneBest -benchtime 1x -v ./internal/bench/
//
// Those live runs were taken while the simulated replicas tokenized every
// text prompt from scratch on the CPU the router shares, which kept a
// burst's requests out of the scraped queues for up to a second. On the
// current replica, with speculation held until the first byte, the
// held-out comparison was run again (BENCHMARKS.md, session 7): the
// cost-aware mix led on all three workloads (score 1.000 against llm-d's
// 0.872), and in five demo runs held 2.47-2.51x rr where llm-d's mix
// fell once to 1.02x.
//
// Before the simulated replica answered a stream's headers at admission,
// as vLLM does, queued requests past the router's 30 s response-header
// timeout were retried on other pods; results before that fix
// (BENCHMARKS.md) are not comparable.
//
// # The ceiling of routing (--oracle)
//
// `--mode virtual --oracle` runs the policies with OracleLag: loads scraped
// every millisecond, KV events in the index as their step ends, no router
// time. No router has that; what a policy reaches under it is the ceiling
// of its scorers on the workload, and the gap to its run with LiveLag is
// what the router's information lag costs it. On the demo workload every
// routed policy meets the same ceiling: what is left of the run is the
// opening burst, whose ~150 new prefixes every pod must compute at once in
// compute-bound steps (about 10 s of simulated time at the hit-rate
// ceiling), and the drain, the last requests decoding in half-empty
// batches (about 12 s), neither of which a placement shortens. The figures
// are in BENCHMARKS.md.
//
// A live run that includes a routed policy (on any dataset but
// multi-turn, which has no virtual form) runs the routed policies once
// more this way on its own workload (RoutingCeiling, under a second on the
// demo workload), reports the best as the run's ceiling ("ceiling" in the
// JSON) and prints each routed policy's share of it under the table: how
// much of what routing can give the workload the live router took.
//
// # Behind two routers (--routers)
//
// `llmd_prefix_router` deploys two router replicas by default behind one
// Service. --routers N (default 2, DefaultRouters) runs each router
// policy a second time behind N replicas, reported as "policy@N" beside
// the one-router row (and its share of the ceiling under it); --routers 1
// runs one router only, and a --policies entry may name "best@3" itself,
// or "best@3-alone": the same replicas without the peer exchange below.
// The client's connections are spread as the Service's kube-proxy spreads
// them, the way rr models it for pods: each keep-alive connection goes to
// a replica drawn at random on its first request and stays there
// ("router_requests" in the JSON counts what each replica decided). Live
// mode starts N `llmd-router serve` processes, each discovering, scraping
// and subscribing to every pod on its own, and sums their counters.
// Virtual mode gives each replica its own picker and view: its own
// in-flight counts and pending prefill, its own index with only its own
// speculative entries, its own router workers, and scrapes out of phase
// (replica k scrapes k/N of a period after the first); every pod's KV
// events and scrapes reach all of them. The replicas exchange their
// decisions as the provider deploys them (DESIGN.md decision 10,
// sim.VirtualConfig.PeerDelay): each decision's in-flight request,
// pending prefill and speculative entries reach the other replicas'
// views --peer-delay (5 ms, peerDelay: router/peers' 2 ms batch period
// and one pod-network hop, rounded up) after it, and so do its
// first token, which settles their entries, and its end. "policy@N-alone"
// runs the replicas without it, each knowing the others' requests only
// once the pods' events and scrapes show them. Live mode gives its
// "policy@N" replicas the exchange itself (router/peers over loopback
// gRPC, each listing every replica as peers.static) and starts
// "policy@N-alone" replicas without it.
//
// # Against given endpoints (--engines)
//
// `llmd-router bench --mode live --engines URL,... --router-urls URL,...`
// runs against a fleet the bench did not start: real vLLM engines (or
// simulated replicas) and routers as deployed, by base URL. Its policies
// are rr and random, which the client places on the engines itself, and
// router, the given routers with whatever configuration they run
// (RunEndpoints; default rr,router). Nothing is restarted between
// policies, and a production engine cannot clear its cache, so each
// policy draws its own prompts (the workload's seed plus its position)
// and every counter is read as its growth over the policy's run. Before
// the first policy the bench reads each engine's KV cache from
// vllm:cache_config_info and times a prompt of the workload's shape on the
// first engine uncached and with its prefix cached (PrefillProbe). Each
// policy's hit rate is read against the ceiling its prompts allow on the
// engines' blocks (each prefix computed once, least recently used blocks
// evicted: hitCeiling), and its mean TTFT beside what the probe predicts
// from its hit rate with no queue. A key for routers or engines that
// require one comes from LLMD_API_KEY. `make demo-vllm` runs it on two
// real CPU engines (internal/vllmcontract BenchmarkABOnRealEngines).
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
// # A day (--day)
//
// `llmd-router bench --day` runs a day-shaped load in virtual time
// (sim.RunDay; sim.BusinessDay's shape, --day-peak at its peak, each hour
// --day-hour virtual seconds) with the seed's prompts (token ids) behind
// one router deciding with the default scorers, on four fleets: --replicas
// fixed pods without and with the router's flow control (vLLM's
// max_num_seqs per pod, 2 pending per pod, a queue of 1,024, a 30 s TTL
// answered 503, and the KV bound at the provider's reserve, which with one
// class holds a pod to its cache for a minute after a scrape saw its
// engine preempt), and pods autoscaled by the HPA's arithmetic (sim.HPA) on
// the router's exact demand per pod (--day-target), then on its offered
// work per pod (--day-work-target: tokens per second, each placed
// request's prompt tokens uncached on its pod plus the tokens it generates,
// over the last minute), from --day-min to --day-max,
// each new pod Ready --pod-start seconds after its creation (PodStart
// cites the source) and each pod taken out drained: the router sends it
// nothing more and it goes when its last request ends. It prints each
// fleet's GPU-hours (pods costing a GPU, from creation to removal), TTFT
// over the day and at its peak, requests served and shed, the prefix hit
// rate and the engines' preemptions, and the fleets hour by hour; DefaultDayOptions says why the day's compression keeps the
// comparison.
//
// # Live against virtual
//
// Virtual mode models the live router's information lag (RouterLag,
// LiveLag): metric scrapes every 50 ms, KV events 10 ms after their step,
// peers' decisions 5 ms after they are made, speculative entries living
// 2 s, in-flight counts exact (up at the
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
