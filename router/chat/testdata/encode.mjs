// JS reference ids for router/chat tests: each stdin line is a JSON string
// (a prompt rendered by render_reference.py); each stdout line is the JSON
// array of ids @lenml/tokenizers gives it without special tokens, as vLLM
// encodes rendered chat prompts.
//
// usage: NODE_PATH=... node encode.mjs FAMILY < texts.jsonl
import { createRequire } from "node:module";
import { join } from "node:path";
import { createInterface } from "node:readline";

const family = process.argv[2];
// ES modules ignore NODE_PATH; resolve the model package through it.
const load = createRequire(join(process.env.NODE_PATH ?? ".", "x.cjs"));
const pkg = load(`@lenml/tokenizer-${family}`);
const tok = pkg.TokenizerLoader.fromPreTrained({ tokenizerJSON: pkg.tokenizerJSON, tokenizerConfig: pkg.tokenizerConfig });

const out = [];
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  out.push(JSON.stringify(tok.encode(JSON.parse(line), { add_special_tokens: false })));
}
process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
