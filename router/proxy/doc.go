// Package proxy is the router's OpenAI-compatible HTTP front: it reads a
// client's request, asks the routing core (package scoring) which pod should
// serve it, forwards it there and passes the response back as it arrives.
//
// # Surface
//
//	POST /v1/completions, /v1/chat/completions   routed by prefix and load
//	POST /v1/route                               the decision, without sending
//	GET  /healthz, /readyz, /metrics             the router's own
//	anything else (GET /v1/models, /tokenize...) forwarded to any ready pod
//
// Responses, streamed SSE included, are copied byte for byte and flushed
// after every read, so a client sees each chunk when the engine sends it.
// X-Llmd-Pod names the pod that answered. Authorization and every other
// end-to-end header pass through untouched (vLLM's --api-key).
//
// # Retries
//
// A request is retried on another pod when connecting fails or the pod
// answers 5xx, as long as nothing has been written to the client; once the
// status line is out the response is the pod's, errors included, because a
// client cannot be told to forget half a stream.
//
// # Admission
//
// Bodies are read whole (the routing decision needs the prompt) up to
// MaxBodyBytes, else 413. A pod takes at most MaxInFlightPerPod requests
// from this router; when every pod is at its cap a request waits in a
// queue of MaxQueue for QueueTimeout, and is shed with 429 when the queue is
// full or the wait runs out. A body that is not a request vLLM would accept
// gets 400 with the reason. A client that goes away cancels the upstream
// request, which frees the engine's slot.
package proxy
