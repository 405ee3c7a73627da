#!/usr/bin/python3
"""A KV-event publisher written outside Go, for the router's tests: it plays
one vLLM engine's ZMQ side (PUB [topic, seq, payload] and the replay ROUTER)
with pyzmq, encoding batches with Debian's python3-msgpack.

    /usr/bin/python3 publisher.py --form map|array [--connect ADDR] [--rank N] [--buffer N] [--topic T]
                                  [--replay-topic]

It prints one JSON line {"pub": ..., "replay": ...} with its bound addresses
(PUB binds 127.0.0.1 unless --connect names the router's bound SUB; with
--replay-topic replies carry the topic frame some vLLM versions add), then reads
one JSON command per line on stdin and answers "ok" after each:
  {"op": "publish", "events": [{"type": ..., field: value}], "drop": false}
      encodes and keeps the batch for replay; sends it unless drop is set
  {"op": "restart"}  seq back to 0 and an empty replay buffer, as a new process
  {"op": "exit"}
"""
import argparse
import collections
import json
import os
import sys
import threading
import time

import msgpack
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import as_array, as_map  # noqa: E402

END = b"\xff" * 8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--form", choices=["map", "array"], default="map")
    ap.add_argument("--connect", default="")
    ap.add_argument("--rank", type=int, default=None)
    ap.add_argument("--buffer", type=int, default=10000)
    ap.add_argument("--topic", default="kv@python@model")
    ap.add_argument("--replay-topic", action="store_true")
    args = ap.parse_args()

    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.setsockopt(zmq.SNDHWM, 100000)
    if args.connect:
        pub.connect(args.connect)
        pub_addr = args.connect
    else:
        pub.bind("tcp://127.0.0.1:*")
        pub_addr = pub.getsockopt_string(zmq.LAST_ENDPOINT)
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind("tcp://127.0.0.1:*")
    replay_addr = router.getsockopt_string(zmq.LAST_ENDPOINT)

    lock = threading.Lock()
    state = {"seq": 0, "last_ts": 0.0, "buffer": collections.deque(maxlen=args.buffer)}

    def serve_replay():
        while True:
            frames = router.recv_multipart()
            ident, start = frames[0], int.from_bytes(frames[-1], "big")
            with lock:
                kept = [(s, p) for s, p in state["buffer"] if s >= start]
            for s, p in kept:
                head = [ident, b""] + ([args.topic.encode()] if args.replay_topic else [])
                router.send_multipart(head + [s.to_bytes(8, "big"), p])
            router.send_multipart([ident, b"", END, b""])

    threading.Thread(target=serve_replay, daemon=True).start()
    print(json.dumps({"pub": pub_addr, "replay": replay_addr}), flush=True)

    enc = as_array if args.form == "array" else as_map
    topic = args.topic.encode()
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "exit":
            break
        if cmd["op"] == "restart":
            with lock:
                state["seq"] = 0
                state["buffer"].clear()
        elif cmd["op"] == "publish":
            events = [enc(ev.pop("type"), ev) for ev in cmd["events"]]
            with lock:
                # Engine time strictly increases, as a real clock does between steps.
                ts = max(time.time(), state["last_ts"] + 1e-6)
                state["last_ts"] = ts
                if args.form == "array":
                    batch = [ts, events] + ([] if args.rank is None else [args.rank])
                else:
                    batch = {"ts": ts, "events": events}
                    if args.rank is not None:
                        batch["data_parallel_rank"] = args.rank
                payload = msgpack.packb(batch)
                seq = state["seq"]
                state["seq"] += 1
                state["buffer"].append((seq, payload))
            if not cmd.get("drop"):
                pub.send_multipart([topic, seq.to_bytes(8, "big"), payload])
        print("ok", flush=True)


if __name__ == "__main__":
    main()
