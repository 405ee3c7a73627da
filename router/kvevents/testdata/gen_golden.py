#!/usr/bin/python3
"""Writes the golden vLLM KV-event payloads the Go decoder and encoder are
tested against, using Debian's python3-msgpack as an encoder independent of
the Go code. Run from anywhere:

    /usr/bin/python3 router/kvevents/testdata/gen_golden.py [OUTDIR]

Each case is golden/<name>.msgpack plus golden/<name>.json holding what the
payload means, computed here: hashes normalised to uint64 (ints keep their
two's-complement bits, digests their last 8 bytes big-endian) as decimal
strings, extra keys as the hex of their msgpack. "encode" names the form in
which the Go encoder must reproduce the bytes exactly; "error" marks payloads
the decoder must reject with an error containing that text.

Event layouts follow vLLM's kv_events.py as the team's PROTOCOLS.md
(section 1) describes them: array_like structs with the tag first and
trailing default fields omitted (up to ~v0.25), or maps keyed by field name
with the tag under "type" (~v0.26 on).
"""
import hashlib
import json
import os
import random

import sys

import msgpack

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
U64 = (1 << 64) - 1

STORED_FIELDS = ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
                 "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"]
REMOVED_FIELDS = ["block_hashes", "medium", "group_idx"]
ALWAYS = {"block_hashes", "parent_block_hash", "token_ids", "block_size"}
DEFAULTS = {"lora_id": None, "medium": None, "lora_name": None, "extra_keys": None, "group_idx": 0,
            "kv_cache_spec_kind": None, "kv_cache_spec_sliding_window": None}


def norm(h):
    if h is None:
        return None
    if isinstance(h, bytes):
        return str(int.from_bytes(h[-8:], "big"))
    return str(h & U64)


def fields_of(kind):
    return {"BlockStored": STORED_FIELDS, "BlockRemoved": REMOVED_FIELDS}.get(kind, [])


def is_default(name, value):
    return name not in ALWAYS and value == DEFAULTS.get(name)


def as_array(kind, ev):
    """array_like with omit_defaults: only trailing defaults are dropped."""
    names = fields_of(kind)
    values = [ev.get(n, DEFAULTS.get(n)) for n in names]
    while names and is_default(names[-1], values[-1]):
        names, values = names[:-1], values[:-1]
    return [kind] + values


def as_map(kind, ev):
    out = {"type": kind}
    for n in fields_of(kind):
        v = ev.get(n, DEFAULTS.get(n))
        if not is_default(n, v):
            out[n] = v
    return out


def meaning(kind, ev):
    extra = ev.get("extra_keys")
    return {
        "kind": kind,
        "block_hashes": [norm(h) for h in ev.get("block_hashes", [])],
        "parent": norm(ev.get("parent_block_hash")),
        "token_ids": ev.get("token_ids") or [],
        "block_size": ev.get("block_size", 0),
        "lora_id": ev.get("lora_id"),
        "lora_name": ev.get("lora_name") or "",
        "medium": ev.get("medium") or "",
        "extra_keys": None if extra is None else [None if x is None else msgpack.packb(x).hex() for x in extra],
        "group_idx": ev.get("group_idx") or 0,
        "spec_kind": ev.get("kv_cache_spec_kind") or "",
        "sliding_window": ev.get("kv_cache_spec_sliding_window"),
    }


def write(name, payload, expect):
    with open(os.path.join(OUT, name + ".msgpack"), "wb") as f:
        f.write(payload)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(expect, f, indent=1, sort_keys=True)
        f.write("\n")


def batch_case(name, form, ts, events, rank="absent", encode=True, mutate=None):
    """events: list of (kind, fields dict). rank "absent" gives the legacy
    two-element batch (array form) or a map without data_parallel_rank."""
    enc = as_array if form == "array" else as_map
    wire_events = [enc(k, ev) for k, ev in events]
    if form == "array":
        batch = [ts, wire_events] + ([] if rank == "absent" else [rank])
    else:
        batch = {"ts": ts, "events": wire_events}
        if rank != "absent":
            batch["data_parallel_rank"] = rank
    if mutate:
        batch = mutate(batch)
    expect = {"ts": ts, "dp_rank": None if rank == "absent" else rank,
              "events": [meaning(k, ev) for k, ev in events], "encode": form if encode else None}
    write(name, msgpack.packb(batch), expect)


def bad_case(name, payload, error):
    write(name, payload, {"error": error})


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(7)

    # The byte example of PROTOCOLS.md section 1.
    batch_case("array_protocols_example", "array", 1.0, [
        ("BlockStored", {"block_hashes": [0x0102030405060708], "parent_block_hash": None,
                         "token_ids": [1, 2, 3, 4], "block_size": 4, "medium": "GPU"})], rank=0)

    # v0.9-0.10: Python hash() values (signed int64), lora_id, two-element batch.
    batch_case("array_legacy_signed", "array", 1717000000.25, [
        ("BlockStored", {"block_hashes": [-5, -(1 << 63), 42], "parent_block_hash": -1,
                         "token_ids": list(range(100, 112)), "block_size": 4, "lora_id": 7}),
        ("BlockRemoved", {"block_hashes": [-5]}),
        ("AllBlocksCleared", {}),
    ], encode=False)  # the Go encoder writes hashes unsigned, as vLLM does since v0.11

    # Every BlockStored field, big unsigned hashes and token ids, plus a
    # position a future vLLM might append (ignored).
    full = {"block_hashes": [U64, 1 << 63], "parent_block_hash": (1 << 63) + 12345,
            "token_ids": [0, 127, 128, 255, 256, 65535, 65536, 151643], "block_size": 4,
            "lora_id": None, "medium": "CPU", "lora_name": "sql-lora",
            "extra_keys": [["sql-lora", "salt-1"], None], "group_idx": 1,
            "kv_cache_spec_kind": "sliding_window", "kv_cache_spec_sliding_window": 4096}
    batch_case("array_all_fields_future", "array", 2.5, [("BlockStored", full)], rank=2, encode=False,
               mutate=lambda b: [b[0], [b[1][0] + [{"future": [1, 2]}]], b[2]])
    batch_case("array_all_fields", "array", 2.5, [("BlockStored", full)], rank=2)
    batch_case("map_all_fields", "map", 2.5, [("BlockStored", full)], rank=2)

    # VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0: raw digests (sha256 32 bytes, xxhash 16 bytes).
    d1 = hashlib.sha256(b"block-1").digest()
    d2 = hashlib.md5(b"block-2").digest()  # 16 bytes, the size of an xxh128 digest
    batch_case("array_bin_hashes", "array", 3.0, [
        ("BlockStored", {"block_hashes": [d1, d2], "parent_block_hash": hashlib.sha256(b"parent").digest(),
                         "token_ids": [9] * 32, "block_size": 16, "medium": "GPU"}),
        ("BlockRemoved", {"block_hashes": [d2], "medium": "GPU"}),
    ], rank=0, encode=False)

    # The newest vLLM: maps, lora_name, a multimodal extra key and a cache salt.
    batch_case("map_newest", "map", 1764400000.5, [
        ("BlockStored", {"block_hashes": [11, 12], "parent_block_hash": None, "token_ids": list(range(32)),
                         "block_size": 16, "medium": "GPU", "lora_name": "chat-lora",
                         "extra_keys": [["chat-lora", ["img-hash-1", 0], "salt"], ["chat-lora"]]}),
        ("BlockRemoved", {"block_hashes": [11], "medium": "GPU"}),
        ("AllBlocksCleared", {}),
    ], rank=0)

    batch_case("map_no_rank_empty", "map", 4.0, [])

    # A CPU offload tier may report stored blocks without their tokens.
    batch_case("map_cpu_without_tokens", "map", 5.0, [
        ("BlockStored", {"block_hashes": [21, 22], "parent_block_hash": 20, "token_ids": [], "block_size": 16,
                         "medium": "CPU"})], rank=1)

    # Unknown batch keys, unknown event fields, the tag not first, an unknown kind.
    def scramble(b):
        ev = b["events"][0]
        b["events"][0] = {"future_field": {"nested": [1, {"x": None}]}, **ev, "another": b"\x00\x01"}
        b["events"].append({"type": "BlockUpdated", "block_hashes": [1], "whatever": 3.5})
        b["source"] = "engine-0"
        return b
    batch_case("map_unknown_fields", "map", 6.0, [
        ("BlockStored", {"block_hashes": [31], "parent_block_hash": 30, "token_ids": [1, 2], "block_size": 2})],
        rank=0, encode=False, mutate=lambda b: scramble(b))
    with open(os.path.join(OUT, "map_unknown_fields.json")) as f:
        exp = json.load(f)
    exp["events"].append({"kind": "unknown", "block_hashes": ["1"], "parent": None, "token_ids": [],
                          "block_size": 0, "lora_id": None, "lora_name": "", "medium": "", "extra_keys": None,
                          "group_idx": 0, "spec_kind": "", "sliding_window": None})
    with open(os.path.join(OUT, "map_unknown_fields.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True)
        f.write("\n")

    # The benchmark's shape: block size 64, 34 blocks in one event.
    toks = [rng.randrange(151643) for _ in range(34 * 64)]
    hashes = [rng.getrandbits(64) for _ in range(34)]
    big = {"block_hashes": hashes, "parent_block_hash": rng.getrandbits(64), "token_ids": toks,
           "block_size": 64, "medium": "GPU"}
    batch_case("array_large", "array", 7.0, [("BlockStored", big)], rank=0)
    batch_case("map_large", "map", 7.0, [("BlockStored", big)], rank=0)

    good = msgpack.packb({"ts": 1.0, "events": [as_map("BlockStored", big)]})
    bad_case("bad_truncated", good[: len(good) // 2], "need")
    bad_case("bad_trailing_byte", msgpack.packb([1.0, []]) + b"\x00", "trailing bytes")
    bad_case("bad_hash_is_str", msgpack.packb([1.0, [["BlockStored", ["abc"], None, [], 4]]]), "hash")
    bad_case("bad_token_count", msgpack.packb([1.0, [["BlockStored", [1, 2], None, [1, 2, 3, 4, 5], 4]]]),
             "token_ids")
    bad_case("bad_token_negative", msgpack.packb([1.0, [["BlockStored", [1], None, [1, -2, 3, 4], 4]]]),
             "token id")
    bad_case("bad_batch_short", msgpack.packb([1.0]), "at least 2")
    bad_case("bad_tag_not_str", msgpack.packb([1.0, [[5, [1]]]]), "tag")
    bad_case("bad_huge_length", b"\x92\xcb" + b"\x00" * 8 + b"\xdd\x7f\xff\xff\xff", "exceeds")
    bad_case("bad_map_without_type", msgpack.packb({"ts": 1.0, "events": [{"block_hashes": [1]}]}), "type")
    bad_case("bad_extra_keys_count", msgpack.packb(
        [1.0, [["BlockStored", [1, 2], None, [], 4, None, "CPU", None, [["x"]]]]]), "extra_keys")
    bad_case("bad_not_msgpack", b"\xc1\xc1\xc1", "0xc1")
    bad_case("bad_rank_negative", msgpack.packb([1.0, [], -1]), "negative")


if __name__ == "__main__":
    main()
