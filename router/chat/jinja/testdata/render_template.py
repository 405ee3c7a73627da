"""Renders {"template", "vars"} lines with the environment of
hf_env.py; prints {"text"} or {"error"} per line."""
import json
import sys

from hf_env import ENV

for line in sys.stdin:
    case = json.loads(line)
    try:
        out = {"text": ENV.from_string(case["template"]).render(**case["vars"])}
    except Exception as e:
        out = {"error": f"{type(e).__name__}: {e}"}
    sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
