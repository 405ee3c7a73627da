// Package proxy is the router's OpenAI-compatible HTTP front: it reads a
// client's request, asks the routing core (package scoring) which pod should
// serve it, forwards it there and passes the response back as it arrives.
//
// # Surface
//
//	POST /v1/completions, /v1/chat/completions   routed by prefix and load
//	POST /v1/route                               the decision, without sending
//	GET  /healthz, /readyz, /metrics             the router's own
//	GET /v1/models, /health, /version,
//	POST /tokenize, /detokenize                  forwarded to any ready pod
//	anything else                                404
//
// Responses, streamed SSE included, are copied byte for byte and flushed
// after every read, so a client sees each chunk when the engine sends it;
// trailers follow. X-Llmd-Pod names the pod that answered. End-to-end
// headers pass through (Authorization included: vLLM's --api-key),
// hop-by-hop ones are dropped, X-Forwarded-For/-Proto/-Host are set, and
// with data-parallel pods the router sets X-data-parallel-rank to the rank
// it chose (the one holding the prefix), which vLLM honours. With APIKey
// the router itself checks the bearer token on /v1 paths as vLLM does; with
// AdminToken, /v1/route needs that token instead.
//
// # Retries, timeouts and circuit breakers
//
// A request is retried on another pod when connecting fails, the pod
// answers 5xx or 429, or its response sends no byte in time, as long as
// nothing has been written to the client: the router waits for a
// response's first body bytes before answering, so a pod that stalls before
// streaming costs a retry, not a failure. Attempts after the first wait a
// full-jitter backoff (up to 20 ms doubled per attempt, at most 500 ms); a
// 429 or 503 carrying Retry-After also keeps that pod out of scoring for
// that long (at most Breaker.MaxOpenFor). A request whose attempts are
// spent, or that finds no healthy pod, gets 503 naming every failure and
// the pods out of service, with Retry-After. Once bytes are out the
// response is the pod's, errors included, because a client cannot be told
// to forget half a stream: a stream that stalls past
// Upstream.StreamIdleTimeout is cut. Streams and passthrough requests wait
// Upstream.ResponseHeaderTimeout for headers (vLLM sends a stream's before
// generating); Upstream.RequestTimeout bounds everything.
//
// Work waiting on a sick pod moves: until its first bytes arrive, an
// attempt is cut when discovery declares its pod out of service (scrapes
// failing, or token counters frozen with requests running: package
// discovery), and the request goes to another pod. That is the progress
// signal of a non-streaming request, whose answer sends nothing until it
// is whole: the pod's own progress, read from its scrapes. The answer
// itself stays vLLM's bytes, untouched, so it is vLLM's non-streaming
// response by construction. Left undetected: one request stuck alone on a
// pod that makes progress on others.
//
// Each pod has a circuit breaker fed by every attempt: Upstream.Breaker.Failures
// failures in a row (one refused connection) open it, which takes the pod
// out of scoring for OpenFor; then one probe request goes through, and its
// outcome closes the circuit or reopens it for twice as long (up to
// MaxOpenFor). The breaker catches a pod that fails every request while
// its /metrics answers; discovery catches one whose /metrics stops.
//
// # Admission
//
// Bodies are read whole (the routing decision needs the prompt) up to
// MaxBodyBytes, else 413. A pod takes at most MaxInFlightPerPod requests
// from every replica, and at most MaxPendingPerPod from this one that have
// yet to answer a byte (the engine's queue as the router sees it). While a
// higher class's requests come, the classes below it are also held to a
// share of each pod's KV cache (KVOutputReserve) and to MaxPendingPrefillPerPod
// uncached prompt tokens unanswered there, with PrefillReserve of the pods
// kept open to the higher classes. When
// the pod the scorers choose over every pod has no room, a request waits
// for it in a queue of MaxQueue. Requests carry a priority class
// (Limits.Classes, by header or API key) and a tenant: room on a pod goes
// to the highest class with a waiter for that pod (else for a pod that
// left), and within a class round-robin over tenants, oldest first.
// A waiter whose class time-to-live (QueueTimeout by default) runs out gets
// 503 with Retry-After; a full queue sheds its newest lowest-class waiter
// with 503 to admit a higher class, else refuses the newcomer with 503; a
// tenant past its share of the queue gets 429 while another tenant waits in
// its class. The slot is taken before the picker records its decision. A body that is not a
// request vLLM would accept, or that breaks one of package chat's bounds,
// gets 400 with the reason. A client that goes away cancels the upstream
// request, which frees the engine's slot.
//
// # Operating it
//
// `llmd-router serve` (router/cmd/llmd-router) assembles the routing core
// and this front from flags, LLMD_* variables and the YAML of package
// config, in that order of precedence; `--pods-file` routes to the
// replicas whose JSON lines `llmd-router sim` prints. Logs are slog JSON;
// /metrics has this package's series (Metrics, Collector), the core
// packages' own collectors and the tokenizer canary's; on SIGTERM /readyz
// fails, the listener closes and open streams finish before exit.
//
// Measured figures live in BENCHMARKS.md at the repository root.
package proxy
