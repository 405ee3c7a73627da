// Package picker is the router's second front: a Gateway API Inference
// Extension endpoint picker (EPP). A team's gateway (Envoy, or one built on
// it) calls it over Envoy's external processing protocol
// (envoy.service.ext_proc.v3.ExternalProcessor) for every request to an
// InferencePool, and forwards the request to the pod it names. Every
// decision goes through package proxy's decision path (Server.Decide):
// the same request parsing, tokenization, breakers, in-flight caps and
// queue, index lookup, scoring and speculation as a request the proxy
// forwards itself, so both fronts choose the same pod for the same request
// from the same state.
//
// # Protocol (Endpoint Picker Protocol v1.0.0)
//
// The gateway streams request headers and the body in chunks
// (FULL_DUPLEX_STREAMED). The picker buffers the body up to the proxy's
// MaxBodyBytes, decides at end of stream, and answers with the header
// x-gateway-destination-endpoint and the same value in dynamic metadata
// envoy.lb: the chosen pod's ip:port, then the next best candidates as
// ordered fallbacks, comma-separated (in this mode the gateway retries, so
// health reaches it through that list; Config.Fallbacks bounds it, and a
// gateway that takes a single address, such as Envoy's ORIGINAL_DST
// cluster keyed on the header, needs none). It then re-sends the buffered body
// in chunks of at most 62,000 bytes. A subset hint in the request's filter
// metadata envoy.lb.subset_hint (x-gateway-destination-endpoint-subset)
// restricts the choice. Nothing eligible answers 503, admission's shedding
// 503 (or 429 for a tenant over its share), a body
// the engine would refuse 400, an oversized one 413, as immediate
// responses. The endpoint that served, reported in metadata envoy.lb
// x-gateway-destination-endpoint-served, moves the request's in-flight
// count and speculation to that pod when it is not the one picked. Response
// bodies pass through unchanged; the first response body chunk settles the
// speculation, the end of the response frees the pod's slot. Requests to
// other paths (model lists and the like) go to the eligible pod with the
// fewest requests in flight.
//
// Sources: kubernetes-sigs/gateway-api-inference-extension
// docs/proposals/004-endpoint-picker-protocol and pkg/lwepp/metadata;
// llm-d's pkg/epp/handlers/server.go and pkg/common/envoy/chunking.go
// (62,000-byte chunks).
//
// # Health, TLS, shutdown
//
// Health follows the gRPC health checking protocol with the services
// liveness (always serving), readiness and
// envoy.service.ext_proc.v3.ExternalProcessor (serving once discovery has
// synced, not while draining). A gateway failing open needs them: Envoy
// fails open in FULL_DUPLEX_STREAMED mode only before it has sent the
// picker a body chunk, so a dead picker must be known down (health checked,
// no panic routing) before the request comes. The listener serves TLS by default, with a
// given certificate or else a self-signed one made at start (gateways
// configured for llm-d's picker expect TLS and skip verification);
// plaintext only when asked. Authentication of clients is the gateway's
// job in this mode: the picker sees no client credentials and checks none.
//
// Measured figures live in BENCHMARKS.md at the repository root.
package picker
