// Package canary keeps the router's in-process tokenizing honest at run
// time (DESIGN.md, decision 5). A Guard per model sends sample requests to
// one pod's POST /tokenize (on a 404, the render endpoint of the request's
// path, which vLLM >= 0.29 serves only with scale-out endpoints enabled) at
// start and every Interval, and compares the engine's ids with those of
// chat.Model. While they agree, Guard.Tokenize runs in process; on a
// mismatch it logs one line, sets llmd_router_tokenizer_engine_path{model}
// to 1, counts llmd_router_tokenizer_canary_checks_total{model,
// result="mismatch"} and sends every request of that model to the engine
// (one HTTP call per request) until a later round agrees. A round that
// cannot reach an engine counts as "unavailable" and changes nothing.
//
// Chat samples are forwarded to /tokenize as they are: its chat form takes
// the chat completions fields with the same defaults (add_generation_prompt
// true, add_special_tokens false). Completion batches are split into one
// /tokenize call per prompt, since /tokenize takes a single prompt.
//
// TestCanaryAgainstEngine runs a Guard against a real HTTP server built in
// the test (a stand-in for a pod's tokenizer endpoints) that answers with
// ids computed by the Python template reference and the JS tokenizer, or
// with one id altered, and walks through agreement, mismatch, the engine
// path, recovery, the render-endpoint fallback and an unavailable engine.
package canary
