package scoring

import "errors"

// Request is the part of a client request that routing reads.
type Request struct {
	// Tokens are the prompt's token ids as the engine will see them (chat
	// template applied). Empty when Untokenizable is set.
	Tokens []uint32
	// LoRA names the adapter the request runs under ("" for the base model);
	// it is mixed into block keys.
	LoRA string
	// More are a completion batch's prompts after the first (Tokens), as
	// the engine will see them: vLLM serves a batch on one engine, each
	// prompt a sequence of its own. Routing reads Tokens alone; the KV bound
	// counts them all.
	More [][]uint32
	// Extra holds per-block extra keys (cache_salt on the first block), as
	// the index keys the engine's (kvevents.SaltExtraKeys); nil for none.
	Extra [][]byte
	// Text is the raw prompt text when the caller has it, for scorers that
	// hash characters rather than tokens (the routing-history scorer).
	Text string
	// Stream says the client asked for a stream of server-sent events.
	Stream bool
	// MaxOutputTokens is the most tokens the request may generate, its
	// choices together (chat.Request.MaxOutputTokens); 0 when unbounded or
	// unknown.
	MaxOutputTokens int
	// Untokenizable, when not empty, says why the request has no token ids:
	// it routes on load alone and is counted.
	Untokenizable string
}

// ErrUntokenizable marks a request body that parses but whose prompt cannot
// be turned into the engine's token ids (unsupported content, a template the
// router cannot render, text the tokenizer refuses). The caller still routes
// it, on load alone.
var ErrUntokenizable = errors.New("untokenizable request")

// Prompter turns an OpenAI-compatible request body into a Request. path is
// the request path ("/v1/completions", "/v1/chat/completions"). An error
// wrapping ErrUntokenizable leaves a routable Request with Untokenizable
// set; any other error means the body is malformed (HTTP 400).
//
// prompt.Chat implements it over package chat for the whole request surface.
type Prompter interface {
	Prompt(path string, body []byte) (*Request, error)
}
