"""A stand-in for ``vllm serve`` that tests of ``ocrflow.engines.server`` can start fast.

``python fake_vllm_cli.py serve MODEL --host H --port P --served-model-name N [flags]``

Like vLLM it rejects unknown flags ("vllm serve: error: unrecognized arguments: ..."),
starts a child process (as vLLM starts EngineCore) that outlives a SIGKILL of its parent,
serves ``/health`` and ``/v1/models`` (checking ``VLLM_API_KEY`` when set) after
``--fake-delay`` seconds, and exits on SIGTERM. Test knobs:

``--fake-delay S``            seconds before the port opens
``--fake-state FILE``         append one line per start (a start counter across restarts)
``--fake-fail-after N``       starts after the N-th exit at once with status 3
``--fake-stubborn-child``     the child ignores SIGTERM (stop must escalate to SIGKILL)
Known vLLM flags accepted: ``--max-model-len N``, ``--limit-mm-per-prompt JSON``,
``--dtype D``, ``--data-parallel-size/-dp N``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHILD = "import signal, sys, time\n{ignore}\nwhile True: time.sleep(60)"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vllm serve")
    parser.add_argument("cmd", choices=["serve"])
    parser.add_argument("model")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name")
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--limit-mm-per-prompt", type=json.loads)
    parser.add_argument("--dtype")
    parser.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    parser.add_argument("--fake-delay", type=float, default=0.0)
    parser.add_argument("--fake-state")
    parser.add_argument("--fake-fail-after", type=int)
    parser.add_argument("--fake-stubborn-child", action="store_true")
    return parser.parse_args(argv)


def count_start(path: str | None) -> int:
    if not path:
        return 1
    with open(path, "a+") as handle:
        handle.write(f"{os.getpid()}\n")
        handle.seek(0)
        return len(handle.read().splitlines())


def make_handler(name: str, key: str | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                return self.answer(200, b"")
            if key and self.headers.get("Authorization") != f"Bearer {key}":
                return self.answer(401, b'{"error": "Unauthorized"}')
            if self.path == "/v1/models":
                return self.answer(200, json.dumps({"data": [{"id": name}]}).encode())
            return self.answer(404, b"{}")

        def answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def main() -> None:
    args = parse(sys.argv[1:])
    print("non-default args:", sys.argv[1:], flush=True)
    print("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
    start = count_start(args.fake_state)
    if args.fake_fail_after is not None and start > args.fake_fail_after:
        print(f"start {start}: failing on purpose", flush=True)
        sys.exit(3)
    ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN)" if args.fake_stubborn_child else ""
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(ignore=ignore)])
    print(f"child pid {child.pid}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    time.sleep(args.fake_delay)
    handler = make_handler(args.served_model_name or args.model, os.environ.get("VLLM_API_KEY"))
    server = ThreadingHTTPServer((args.host, args.port), handler)
    print(f"Starting vLLM server on http://{args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
