# An independent KV-event subscriber: pyzmq and msgpack, as a Python router
# would read a vLLM replica. Prints the first live message and a replay
# from seq 0 as one JSON line.
import json
import sys

import msgpack
import zmq

ctx = zmq.Context()
sub = ctx.socket(zmq.SUB)
sub.connect(sys.argv[1])
sub.setsockopt(zmq.SUBSCRIBE, b"")
print("ready", flush=True)
topic, seq, payload = sub.recv_multipart()

dealer = ctx.socket(zmq.DEALER)
dealer.connect(sys.argv[2])
dealer.send_multipart([b"", (0).to_bytes(8, "big")])
replayed = []
while True:
    frames = dealer.recv_multipart()
    if frames[1] == b"\xff" * 8:
        break
    replayed.append({"seq": int.from_bytes(frames[1], "big"), "batch": msgpack.unpackb(frames[2], raw=False)})

print(json.dumps({"topic": topic.decode(), "seq": int.from_bytes(seq, "big"),
                  "batch": msgpack.unpackb(payload, raw=False), "replayed": replayed}), flush=True)
