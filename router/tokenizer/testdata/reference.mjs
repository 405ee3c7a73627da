// Independent reference for the Go tokenizer tests: encodes texts with the
// @lenml/tokenizers port of transformers.js and prints their ids.
//
// usage: node reference.mjs FAMILY OPTIONS_JSON < inputs.jsonl
//   FAMILY        qwen3 | llama3 | deepseek_v3 (package @lenml/tokenizer-FAMILY)
//   OPTIONS_JSON  {"add_special_tokens": bool,
//                  "drop_added_above": id (drop added tokens with a larger id),
//                  "post_processor": object (replaces the file's post_processor),
//                  "bench": bool (print only {"texts", "bytes", "ms"} of one timed pass)}
// Each input line is a JSON string; each output line is a JSON array of ids.
import { createRequire } from "node:module";
import { join } from "node:path";
import { createInterface } from "node:readline";

const [family, optionsJSON] = process.argv.slice(2);
const options = JSON.parse(optionsJSON || "{}");
// ES modules ignore NODE_PATH, so resolve the package from it explicitly.
const require = createRequire(join(process.env.NODE_PATH ?? ".", "reference.cjs"));
const pkg = require(`@lenml/tokenizer-${family}`);

const json = { ...pkg.tokenizerJSON };
if (options.drop_added_above !== undefined) {
  json.added_tokens = json.added_tokens.filter((t) => t.id <= options.drop_added_above);
}
if (options.post_processor !== undefined) {
  json.post_processor = options.post_processor;
}
const tokenizer = pkg.TokenizerLoader.fromPreTrained({ tokenizerJSON: json, tokenizerConfig: pkg.tokenizerConfig });
const encodeOptions = { add_special_tokens: !!options.add_special_tokens };

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
if (options.bench) {
  const texts = [];
  for await (const line of lines) texts.push(JSON.parse(line));
  let bytes = 0;
  for (const t of texts) bytes += Buffer.byteLength(t);
  const start = process.hrtime.bigint();
  for (const t of texts) tokenizer.encode(t, encodeOptions);
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  process.stdout.write(JSON.stringify({ texts: texts.length, bytes, ms }) + "\n");
} else {
  let out = [];
  let size = 0;
  for await (const line of lines) {
    const s = JSON.stringify(tokenizer.encode(JSON.parse(line), encodeOptions));
    out.push(s);
    size += s.length;
    if (size > 1 << 20) {
      process.stdout.write(out.join("\n") + "\n");
      out = [];
      size = 0;
    }
  }
  if (out.length > 0) process.stdout.write(out.join("\n") + "\n");
}
