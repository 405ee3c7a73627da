"""Parses `vllm serve` argument lists with vLLM's own parser and config.

Reads a JSON list of argument lists on stdin (each as the fleet renders it,
the model path first) and writes to the file named by its one argument a
JSON list of answers, one per list: {"ok": true} or {"ok": false, "error":
"..."} (vLLM logs on stdout). Each list goes through what `vllm serve`
does before it loads a model: the serve subcommand's parser
(vllm/entrypoints/cli/serve.py ServeSubcommand.subparser_init), its
validate (as vllm/entrypoints/cli/main.py calls it) and the engine's configuration
(AsyncEngineArgs.from_cli_args(...).create_engine_config()), which reads the
model's config.json and checks every value against it and the platform.
"""

import argparse
import contextlib
import io
import json
import sys

from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser


def check(args):
    serve = ServeSubcommand()
    parser = FlexibleArgumentParser(prog="vllm")
    sub = parser.add_subparsers(dest="subparser")
    serve.subparser_init(sub)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(["serve", *args])
    except SystemExit:
        return {"ok": False, "error": err.getvalue().strip().splitlines()[-1]}
    if ns.model_tag is not None:
        ns.model = ns.model_tag
    try:
        serve.validate(ns)
        AsyncEngineArgs.from_cli_args(ns).create_engine_config()
    except Exception as e:  # any refusal is the answer, not a crash
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    return {"ok": True}


def main(out):
    answers = [check(args) for args in json.load(sys.stdin)]
    with open(out, "w") as f:
        json.dump(answers, f)


if __name__ == "__main__":
    main(sys.argv[1])
