// Package prompt turns an OpenAI-compatible request body into the routing
// request the scorers read (package scoring's Request): the prompt's token
// ids as the engine will see them (chat template applied, through package
// chat), the LoRA adapter that keys its blocks apart, and the cache_salt
// as the first block's extra key. Requests it cannot tokenize route on load
// alone, with the reason; a body the engine would refuse, or one that
// breaks package chat's bounds, is an error the proxy answers with 400.
//
// While the tokenizer parity canary (package chat/canary) reports that the
// in-process ids differ from the engine's, requests are tokenized by a pod.
//
// The served model's prompts go through the tokenizer's prefix cache
// (tokenizer.PrefixCache, bounded by tokenizer.cache_bytes), so a request
// repeating a recent one's rendered messages is not tokenized again;
// Collector exports its counters.
package prompt
