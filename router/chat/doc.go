// Package chat turns OpenAI-compatible requests into the token ids a vLLM
// engine caches, in process: vLLM's request normalisation, the model's chat
// template rendered as Hugging Face transformers renders it, then the BPE
// of package tokenizer (DESIGN.md, decision 5). A template that is off by
// one space gives zero cache hits, so every step mirrors the engine's
// Python code rule for rule, and the tests hold it to Python's jinja2 and
// to an independent JS tokenizer.
//
// # Request surface
//
// ParseRequest reads a body sent to /v1/completions (a string, a list of
// strings, a list of token ids or a list of such lists; token ids are used
// as they are) or /v1/chat/completions, with "model" (a base model or a LoRA
// adapter registered in a Catalog, whose name the block keys must mix in)
// and "cache_salt". Everything else is returned with Untokenizable set, an
// UntokenizableError with a short Reason for a metric label, so the router
// routes it on load alone: other endpoints (/v1/responses, /v1/messages:
// vLLM renders them through other code paths), multimodal content parts
// (the engine expands them into placeholder tokens), prompt_embeds,
// non-function tools, unknown models. Bodies vLLM itself refuses are
// errors wrapping ErrInvalidRequest.
//
// # vLLM's normalisation (normalize.go, render.go)
//
// The rules mirror vllm/entrypoints/chat_utils.py and vllm/renderers/hf.py
// (2025-2026); each function names the behaviour it copies:
//
//   - content: null is no parts, a string is one text part; text, input_text,
//     output_text, refusal and thinking parts are text, a text part whose
//     text is null is skipped; in the "string" content format the texts are
//     joined with "\n" (so null content becomes ""), in the "openai" format
//     they stay {"type": "text", "text": ...} parts;
//   - the content format is resolved as vLLM's "auto" does: "openai" when the
//     template loops over a message's content, followed through {% set %}
//     aliases of messages and loop targets, else "string";
//   - each message is rebuilt with only role, content, tool_calls
//     (assistant), reasoning copied to reasoning and reasoning_content
//     (assistant), tool_call_id (tool), name and task when strings, tools
//     (developer); other keys are dropped, as vLLM drops them;
//   - tool calls keep id, function {arguments, name}, type in that order (the
//     pydantic TypedDict validation vLLM runs), an empty list is removed,
//     and string arguments are parsed with json.loads semantics, an
//     unparsable string becoming {};
//   - tools are dumped as ChatCompletionToolsParam.model_dump(): type, then
//     function {name, description, parameters, then extra keys}, then the
//     tool's extra keys, missing fields as None, request key order kept;
//   - add_generation_prompt defaults to true, continue_final_message to
//     false, both true is refused; chat_template_kwargs (after the server's
//     defaults) override them and reach the template only when the
//     template reads the name or it is an apply_chat_template parameter;
//     "chat_template" and "tokenize" there are refused (vLLM asks
//     jinja2.meta.find_undeclared_variables; jinja.Template.Reads accepts
//     any name the template mentions, a superset whose extra names the
//     template assigns before reading or uses only as attribute, filter or
//     test names, so passing them changes nothing);
//   - the template is the request's chat_template (only with
//     TrustRequestTemplate, vLLM's --trust-request-chat-template; a name
//     selects one of the model's named templates), else "tool_use" when
//     tools are given and the model has one, else "default";
//   - the template sees special_tokens_map (only the tokens that are set:
//     Qwen3 has no bos_token variable), the kwargs, messages, tools,
//     documents and add_generation_prompt; continue_final_message cuts the
//     text after the final message as transformers does;
//   - the rendered text is encoded with add_special_tokens (default false for
//     chat, true for completions).
//
// JSON bodies are decoded as Python's json.loads does (decodeJSON): key order
// kept, a repeated key keeps its first place and last value, integers stay
// integers (beyond 64 bits as their digits), NaN and Infinity accepted, a
// lone surrogate escape refused as untokenizable.
//
// # Templates
//
// The model's templates (tokenizer_config.json's chat_template, a string or
// named templates, or Options.ChatTemplate) and a request's chat_template
// are compiled and rendered by package jinja, this router's Jinja2 engine
// with the Hugging Face environment. This package picks the template,
// resolves its content format and builds the variables it sees.
//
// # Exactness (tests)
//
// TestParityWithReferences renders 320 generated bodies per family (system,
// user, assistant and tool turns, tool calls with unsorted, invalid and
// empty arguments, reasoning, tools with <&', non-ASCII and unsorted keys,
// list-of-parts content, generation prompt on, off and absent,
// continue_final_message, chat_template_kwargs) for Qwen3, Llama 3 and
// DeepSeek V3, and requires the text of testdata/render_reference.py
// (Debian's /usr/bin/python3 with python3-jinja2 3.1.2 and the transformers
// environment written out) and ids identical to @lenml/tokenizers' ids for
// that text: 956 of 960 render identically and the 4 others are refused by
// both. TestRequestTemplates does the same for request templates (the
// "openai" content format) and named templates.
//
// Measured figures live in BENCHMARKS.md at the repository root.
package chat
