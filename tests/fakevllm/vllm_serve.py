"""``vllm serve`` played by the test server, for tests of the servers ocrflow starts itself.

``python -m tests.fakevllm.vllm_serve serve MODEL --host H --port P --served-model-name N
[FLAGS]`` runs ``tests.fakevllm.server`` on that address under that model name. vLLM flags
the test server has no use for (the recipes' and presets' ``--limit-mm-per-prompt``,
``--kv-cache-dtype``, ``--quantization``, ``--dtype``) are accepted and ignored; the rest go
to the test server (``--pages-per-s``, ``--stats-on-exit``, faults, ...).
"""

from __future__ import annotations

import argparse
import sys

from tests.fakevllm.server import main as fakevllm_main

IGNORED = ("--limit-mm-per-prompt", "--kv-cache-dtype", "--quantization", "--dtype")


def main(argv: list[str]) -> int:
    """Parse ``vllm serve``'s command line and serve it with the test server."""
    parser = argparse.ArgumentParser(prog="vllm")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name")
    for flag in IGNORED:
        parser.add_argument(flag)
    known, rest = parser.parse_known_args(argv)
    name = known.served_model_name or known.model
    return fakevllm_main(["--host", known.host, "--port", str(known.port), "--model", name, *rest])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
