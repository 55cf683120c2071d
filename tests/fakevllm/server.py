"""fakevllm: an OpenAI-compatible stand-in for a vLLM OCR server, with faults on demand.

Run from the repository root::

    python -m tests.fakevllm.server --port 0 --pages-per-s 10 --max-num-seqs 128

The first line on stdout is ``LISTENING http://HOST:PORT`` (flushed); logs go to stderr.

Endpoints
    ``POST /v1/chat/completions``  chat completions with ``text`` and ``image_url`` parts
                                   (``data:image/...;base64,`` URLs only); ``stream`` works.
    ``GET /v1/models``             OpenAI model list with ``max_model_len``.
    ``GET /health``                200 empty; 503 while warming up or dead.
    ``GET /metrics``               Prometheus text with vLLM's metric names.
    ``GET /stats``                 JSON counters for tests (outcomes, image hash -> count,
                                   engine steps, server CPU seconds).
    ``GET|POST /admin/faults``     read or change fault rates at run time (JSON object).

Capacity model (see ``engine.py``): at most ``--max-num-seqs`` sequences run; each engine
step emits one token per running sequence and lasts ``base + per_seq * running``.
``--pages-per-s X`` sets the step so that a *full* batch yields X pages/s:
``full_step = max_num_seqs / (X * tokens_per_page)``, of which ``--base-fraction`` (default
0.5) is fixed and the rest grows with the batch. A smaller batch is therefore faster per
step but yields fewer pages/s, as on a GPU.

Prompt-token estimate (for usage and the context check): ``ceil(text_chars / 4)`` plus
``ceil(len(base64 payload) / 750)`` per image; the text alone counts one token per image
placeholder instead. The context check is vLLM 0.32's (``--context-check clamp``, the
default; checked against the real CPU build in ``tests/integration/test_vllm_context.py``),
each a 400 with vLLM's wording and ``param``, in this order:
``max_tokens > max_model_len`` "max_tokens=M cannot be greater than max_model_len=N. ...";
text alone over N "This model's maximum context length is N tokens. However, your prompt
contains at least N+1 input tokens, ..."; text and images over N "Input length (P) exceeds
model's maximum context length (N)."; a prompt of exactly N "max_tokens must be at least 1,
got 0. ...". Otherwise ``max_tokens`` (or, without one, the page) is clamped to the room
the prompt leaves, ``N - P``: the answer then ends with finish_reason ``length``.
``--context-check strict`` is the behaviour of older vLLM and other servers: 400 "This
model's maximum context length is N tokens. However, you requested M tokens (P in the
messages, C in the completion). ..." whenever ``P + max_tokens > N``.

``--api-key KEY``: like ``vllm serve --api-key``, every ``/v1`` route answers 401
``{"error": "Unauthorized"}`` unless the request carries ``Authorization: Bearer KEY``.

Faults (probabilities per completion request, drawn from ``--seed``; the first that hits
wins, in this order): ``drop`` close the connection without answering; ``hang`` answer
nothing until the client leaves (capped by ``--hang-s``); ``fail-500``/``fail-503``/
``fail-429`` (429 carries ``Retry-After``); ``context-overflow`` 400 (vLLM's wording for a
text too long, above); ``truncate`` send headers with the full Content-Length, half the
body, then close; ``length`` finish_reason ``length`` with a repetition loop cut mid-word
(usage reports ``max_tokens``, or tokens-per-page without it; it costs tokens-per-page
engine steps); ``garbage`` finish_reason ``stop`` with unparsable content;
``null-content``/``empty-content`` a 200 whose message ``content`` is null / ""; ``no-choices``
a 200 with ``choices: []``; ``invalid-json`` a 200 whose body is cut JSON. ``slow`` is
drawn independently and adds ``--slow-s`` seconds before the answer. Injected faults other
than ``truncate``/``length``/``garbage`` do not use the engine.
``--die-after N``: the (N+1)-th completion request makes the process exit at once
(``os._exit(1)``), losing whatever was in flight. ``--dead-after N``: from the (N+1)-th
request on, the engine is dead: in-flight and new requests get 500, ``/health`` 503.
``--warmup-s S``: for S seconds ``/health`` and completions answer 503 (models answers).

``/stats`` ``outcomes`` keys (one per completion request; ``slow`` counts in addition):
``stop``, ``length`` (answers, by finish reason; ``length`` when max_tokens < tokens per
page), ``truncate``, ``length_fault``, ``garbage``, ``drop``, ``hang``, ``fail_500``,
``fail_503``, ``fail_429``, ``context_overflow`` (injected or real), ``bad_request``,
``model_not_found``, ``unauthorized``, ``warming_up``, ``dead``, ``null_content``,
``empty_content``, ``no_choices``, ``invalid_json``, ``aborted`` (client left
while queued or generating; the sequence is freed as vLLM aborts it). ``images`` maps each
image's ``page-<12 hex>`` tag to the number of requests that carried it.

Figure requests (ocrflow's ``describe`` stage): a request whose text holds
``--figure-marker`` (default ``replies.FIGURE_MARKER``) is answered by
``replies.figure_text``: a caption (or a table, or a class) that names the figure image's
tag; it costs the engine as many steps as a page. ``/stats`` ``figures`` counts them by tag.
``--figures-per-page N``: a ``deepseek`` reply has N ``image`` regions (default 1).
``--second-pass-replies`` (DeepSeek region second passes): a request whose text is
``Free OCR.`` gets ``replies.region_text`` (one line naming the crop's tag); a PNG image
1280 px long or more gets its reply plus a ``table`` region (``replies.table_region``).
``--echo-prompt``: page replies open with the request's prompt text, as a model that
echoes its prompt does (ocrflow's clean pass strips it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import signal
import sys
from typing import Any

from aiohttp import web

# Re-exported: tests import B64_BYTES_PER_IMAGE_TOKEN from here; benchmarks subclass
# server.Capacity and replace server.capacity_from_args, which config_from_args looks up
# here at call time.
from tests.fakevllm.chat_request import B64_BYTES_PER_IMAGE_TOKEN as B64_BYTES_PER_IMAGE_TOKEN
from tests.fakevllm.completions import chat_completions
from tests.fakevllm.engine import Capacity, Engine
from tests.fakevllm.observability import (
    admin_faults,
    health,
    metrics,
    models,
    stats,
    stats_json,
    version,
)
from tests.fakevllm.replies import FIGURE_MARKER, REPLY_FORMATS
from tests.fakevllm.state import EXCLUSIVE_FAULTS, STATE, Faults, ServerConfig, ServerState

#: aiohttp's own limit (1 MiB) is far below a request carrying page images in base64
MAX_BODY_BYTES = 256 * 1024 * 1024


def auth_middleware(api_key: str) -> Any:
    """vLLM's ``--api-key`` check: ``/v1`` routes need ``Authorization: Bearer KEY``."""

    @web.middleware
    async def check(request: web.Request, handler: Any) -> web.StreamResponse:
        wanted = f"Bearer {api_key}"
        if request.path.startswith("/v1") and request.headers.get("Authorization") != wanted:
            request.app[STATE].outcomes["unauthorized"] += 1
            return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    return check


def make_app(config: ServerConfig, faults: Faults) -> web.Application:
    """Build the aiohttp application with its state and engine."""
    middlewares = [auth_middleware(config.api_key)] if config.api_key else []
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=middlewares)
    engine = Engine(config.capacity, config.kv_cache_tokens)
    app[STATE] = ServerState(config, faults, engine, random.Random(config.seed))

    async def engine_ctx(_app: web.Application) -> Any:
        engine.start()
        yield
        await engine.stop()

    app.cleanup_ctx.append(engine_ctx)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/stats", stats)
    app.router.add_get("/version", version)
    app.router.add_route("*", "/admin/faults", admin_faults)
    return app


async def serve(config: ServerConfig, faults: Faults) -> None:
    """Serve until SIGTERM/SIGINT; print the LISTENING line once bound."""
    runner = web.AppRunner(
        make_app(config, faults), handler_cancellation=True, access_log=None, shutdown_timeout=1.0
    )
    await runner.setup()
    site = web.TCPSite(
        runner, config.host, config.port, backlog=1024, reuse_port=config.reuse_port or None
    )
    await site.start()
    host, port = runner.addresses[0][:2]
    url = f"http://{host}:{port}"
    print(f"LISTENING {url}", flush=True)
    if config.ready_file:
        with open(config.ready_file, "w", encoding="utf-8") as fh:
            fh.write(url + "\n")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        if config.stats_on_exit:
            print("STATS " + json.dumps(stats_json(runner.app[STATE])), flush=True)
        await runner.cleanup()


def build_parser() -> argparse.ArgumentParser:
    """Command-line flags."""
    p = argparse.ArgumentParser(
        prog="python -m tests.fakevllm.server", description=__doc__.split("\n")[0]
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--reuse-port", action="store_true", help="share the port with other servers")
    p.add_argument("--stats-on-exit", action="store_true", help="print STATS {json} when stopped")
    p.add_argument("--model", default="test-model", help="served model name")
    p.add_argument("--max-num-seqs", type=int, default=128)
    p.add_argument("--tokens-per-page", type=int, default=100)
    p.add_argument("--tokens-jitter", type=float, default=0.0, help="±fraction per image")
    p.add_argument("--pages-per-s", type=float, default=None, help="full-batch capacity")
    p.add_argument("--base-fraction", type=float, default=0.5, help="fixed share of a full step")
    p.add_argument("--step-base-ms", type=float, default=None)
    p.add_argument("--step-per-seq-ms", type=float, default=None)
    p.add_argument("--max-model-len", type=int, default=16384)
    p.add_argument("--kv-cache-tokens", type=int, default=None, help="default max-num-seqs*4096")
    p.add_argument("--reply-format", choices=REPLY_FORMATS, default="markdown")
    p.add_argument("--seed", type=int, default=0)
    for name in (*EXCLUSIVE_FAULTS, "slow"):
        p.add_argument("--" + name.replace("_", "-"), type=float, default=0.0, metavar="P")
    p.add_argument("--slow-s", type=float, default=2.0)
    p.add_argument("--hang-s", type=float, default=3600.0, help="a hang ends after this")
    p.add_argument("--retry-after-s", type=float, default=1.0, help="Retry-After of 429s")
    p.add_argument("--die-after", type=int, default=None, metavar="N")
    p.add_argument("--dead-after", type=int, default=None, metavar="N")
    p.add_argument("--warmup-s", type=float, default=0.0)
    p.add_argument("--ready-file", default=None)
    p.add_argument("--context-check", choices=("clamp", "strict"), default="clamp")
    p.add_argument("--api-key", default=None, help="/v1 routes need this bearer token")
    p.add_argument("--figures-per-page", type=int, default=1, help="deepseek: image boxes")
    p.add_argument("--figure-marker", default=FIGURE_MARKER, help="text of figure requests")
    p.add_argument("--second-pass-replies", action="store_true", help="deepseek ROI/large")
    p.add_argument("--echo-prompt", action="store_true", help="page replies repeat the prompt")
    return p


def capacity_from_args(args: argparse.Namespace) -> Capacity:
    """The capacity model named by ``--pages-per-s`` or ``--step-*-ms`` (default 10 pages/s)."""
    explicit = args.step_base_ms is not None or args.step_per_seq_ms is not None
    if explicit and args.pages_per_s is not None:
        raise SystemExit("give --pages-per-s or --step-base-ms/--step-per-seq-ms, not both")
    if explicit:
        return Capacity(
            args.max_num_seqs,
            (args.step_base_ms or 0.0) / 1000,
            (args.step_per_seq_ms or 0.0) / 1000,
        )
    pages = args.pages_per_s if args.pages_per_s is not None else 10.0
    return Capacity.from_pages_per_s(
        pages, args.max_num_seqs, args.tokens_per_page, args.base_fraction
    )


def config_from_args(argv: list[str] | None = None) -> tuple[ServerConfig, Faults]:
    """Parse flags into a frozen config and the initial fault settings."""
    args = build_parser().parse_args(argv)
    capacity = capacity_from_args(args)
    if capacity.step_time(1) <= 0:
        raise SystemExit("the step time must be positive")
    config = ServerConfig(
        host=args.host,
        port=args.port,
        model=args.model,
        capacity=capacity,
        tokens_per_page=args.tokens_per_page,
        tokens_jitter=args.tokens_jitter,
        max_model_len=args.max_model_len,
        kv_cache_tokens=args.kv_cache_tokens or args.max_num_seqs * 4096,
        reply_format=args.reply_format,
        seed=args.seed,
        die_after=args.die_after,
        dead_after=args.dead_after,
        warmup_s=args.warmup_s,
        ready_file=args.ready_file,
        reuse_port=args.reuse_port,
        stats_on_exit=args.stats_on_exit,
        context_check=args.context_check,
        api_key=args.api_key,
        figures_per_page=args.figures_per_page,
        figure_marker=args.figure_marker,
        second_pass_replies=args.second_pass_replies,
        echo_prompt=args.echo_prompt,
    )
    faults = Faults(slow_s=args.slow_s, hang_s=args.hang_s, retry_after_s=args.retry_after_s)
    faults.update({name: getattr(args, name) for name in (*EXCLUSIVE_FAULTS, "slow")})
    return config, faults


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m tests.fakevllm.server``."""
    config, faults = config_from_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(config, faults))
    return 0


if __name__ == "__main__":
    sys.exit(main())
