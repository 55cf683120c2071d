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
import dataclasses
import json
import math
import os
import random
import signal
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakevllm.engine import Capacity, Engine, EngineDeadError
from tests.fakevllm.replies import (
    FIGURE_MARKER,
    FREE_OCR_PROMPT,
    LARGE_MODE_SIDE,
    REPLY_FORMATS,
    cut_text,
    figure_text,
    garbage_text,
    length_fault_text,
    normal_text,
    page_tag,
    png_size,
    region_text,
    table_region,
    token_logprobs,
)

#: chars of prompt text per estimated token, and base64 bytes per estimated image token
TEXT_CHARS_PER_TOKEN = 4
B64_BYTES_PER_IMAGE_TOKEN = 750
MAX_BODY_BYTES = 256 * 1024 * 1024
ENGINE_DEAD_MESSAGE = (
    "EngineCore died (EngineDeadError): EngineCore encountered an issue. "
    "See stack trace (above) for the root cause."
)
#: faults that exclude each other, in the order they are drawn
EXCLUSIVE_FAULTS = (
    "drop",
    "hang",
    "fail_500",
    "fail_503",
    "fail_429",
    "context_overflow",
    "truncate",
    "length",
    "garbage",
    "null_content",
    "empty_content",
    "no_choices",
    "invalid_json",
)


#: ``/stats`` outcome names of injected faults that still produce an answer
OUTCOME_NAMES = {"truncate": "truncate", "length": "length_fault", "garbage": "garbage"}


@dataclass
class Faults:
    """Fault probabilities and parameters; changeable at run time via ``/admin/faults``."""

    drop: float = 0.0
    hang: float = 0.0
    fail_500: float = 0.0
    fail_503: float = 0.0
    fail_429: float = 0.0
    context_overflow: float = 0.0
    truncate: float = 0.0
    length: float = 0.0
    garbage: float = 0.0
    null_content: float = 0.0
    empty_content: float = 0.0
    no_choices: float = 0.0
    invalid_json: float = 0.0
    slow: float = 0.0
    slow_s: float = 2.0
    hang_s: float = 3600.0
    retry_after_s: float = 1.0

    def update(self, changes: dict[str, Any]) -> None:
        """Apply ``{name: number}`` changes; unknown names or non-numbers raise ValueError."""
        names = {f.name for f in dataclasses.fields(self)}
        for key, value in changes.items():
            name = key.replace("-", "_")
            if name not in names or isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"bad fault setting {key!r}={value!r}")
            setattr(self, name, float(value))


@dataclass(frozen=True)
class ServerConfig:
    """Everything fixed at start-up."""

    host: str = "127.0.0.1"
    port: int = 0
    model: str = "test-model"
    capacity: Capacity = field(default_factory=lambda: Capacity(128, 0.064, 0.0005))
    tokens_per_page: int = 100
    tokens_jitter: float = 0.0
    max_model_len: int = 16384
    kv_cache_tokens: int = 128 * 4096
    reply_format: str = "markdown"
    seed: int = 0
    die_after: int | None = None
    dead_after: int | None = None
    warmup_s: float = 0.0
    ready_file: str | None = None
    #: Share the port with other servers (SO_REUSEPORT, as vLLM binds): the kernel spreads
    #: connections over them, like a load balancer in front of several replicas.
    reuse_port: bool = False
    #: Print ``STATS {json}`` (the ``/stats`` counters) on stdout when stopped: a server
    #: that ocrflow starts and stops itself leaves its counters in its log.
    stats_on_exit: bool = False
    #: "clamp" (vLLM 0.32) or "strict" (older servers); see the module docstring.
    context_check: str = "clamp"
    api_key: str | None = None
    #: DeepSeek replies: ``image`` regions (figure boxes) per page.
    figures_per_page: int = 1
    #: A request whose text holds this is a figure request (see ``replies.figure_text``).
    figure_marker: str = FIGURE_MARKER
    #: DeepSeek region second passes: "Free OCR." gets ``region_text``; an image 1280 px
    #: long gets a grounding reply with a ``table`` region (see the module docstring).
    second_pass_replies: bool = False
    #: Page replies open with the request's prompt text (a model echoing its prompt).
    echo_prompt: bool = False


class BadRequest(Exception):
    """A malformed chat-completion request (answered with HTTP 400)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ChatRequest:
    """The parts of a chat-completion request that the fake server uses."""

    model: str | None
    text_chars: int
    images: tuple[str, ...]
    temperature: float | None
    max_tokens: int | None
    stream: bool
    include_usage: bool
    #: The name the request gave its output budget (vLLM's messages repeat it).
    max_tokens_param: str = "max_tokens"
    #: The text parts of the request, joined (for recognising figure requests).
    text: str = ""
    #: ``"logprobs": true``: the answer carries one logprob a token (``replies.logprobs``).
    logprobs: bool = False

    def text_tokens(self) -> int:
        """Estimated tokens of the text, one placeholder token per image (vLLM counts these
        before it expands the images)."""
        return math.ceil(self.text_chars / TEXT_CHARS_PER_TOKEN) + len(self.images)

    def prompt_tokens(self) -> int:
        """Estimated prompt tokens (see module docstring)."""
        image_tokens = sum(math.ceil(len(b64) / B64_BYTES_PER_IMAGE_TOKEN) for b64 in self.images)
        return math.ceil(self.text_chars / TEXT_CHARS_PER_TOKEN) + image_tokens


@dataclass
class ServerState:
    """All mutable state of one server process."""

    config: ServerConfig
    faults: Faults
    engine: Engine
    rng: random.Random
    started: float = field(default_factory=time.monotonic)
    received: int = 0
    hanging: int = 0
    prompt_tokens_total: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    finish_reasons: Counter[str] = field(default_factory=Counter)
    images: Counter[str] = field(default_factory=Counter)
    #: Figure requests by the figure's image tag (``images`` counts them too).
    figures: Counter[str] = field(default_factory=Counter)

    def warming(self) -> bool:
        """True during the ``--warmup-s`` window after start-up."""
        return time.monotonic() - self.started < self.config.warmup_s

    def draw_fault(self) -> str | None:
        """The exclusive fault this request gets, if any (first hit in order wins)."""
        for name in EXCLUSIVE_FAULTS:
            p = getattr(self.faults, name)
            if p > 0 and self.rng.random() < p:
                return name
        return None

    def draw_slow(self) -> bool:
        """Whether this request is delayed by ``slow_s``."""
        return self.faults.slow > 0 and self.rng.random() < self.faults.slow

    def page_tokens(self, tags: list[str]) -> int:
        """Output tokens of a page: tokens-per-page, jittered deterministically by image."""
        base = self.config.tokens_per_page
        jitter = self.config.tokens_jitter
        if jitter <= 0 or not tags:
            return base
        u = int(tags[0][-12:], 16) / float(16**12)
        return max(1, round(base * (1 + jitter * (2 * u - 1))))


STATE = web.AppKey("state", ServerState)


# --------------------------------------------------------------------- request parsing
def _parse_part(part: Any, images: list[str], texts: list[str]) -> int:
    """Validate one content part; collect image payloads and texts; return its text length."""
    if not isinstance(part, dict):
        raise BadRequest("Each content part must be an object", "messages")
    kind = part.get("type")
    if kind == "text":
        text = part.get("text")
        if not isinstance(text, str):
            raise BadRequest("A text part needs a string 'text'", "messages")
        texts.append(text)
        return len(text)
    if kind == "image_url":
        image_url = part.get("image_url")
        url = image_url.get("url") if isinstance(image_url, dict) else None
        if not isinstance(url, str):
            raise BadRequest("An image_url part needs image_url.url", "messages")
        head, sep, payload = url.partition(";base64,")
        if not sep or not head.startswith("data:image/") or not payload:
            raise BadRequest("Only data:image/...;base64, URLs are supported", "messages")
        images.append(payload)
        return 0
    raise BadRequest(f"Unsupported content part type {kind!r}", "messages")


def _parse_messages(messages: Any, images: list[str], texts: list[str]) -> int:
    """Validate ``messages``; return the text length, collecting image payloads."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list", "messages")
    chars = 0
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest("Each message needs a string 'role'", "messages")
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
            texts.append(content)
        elif isinstance(content, list):
            chars += sum(_parse_part(part, images, texts) for part in content)
        else:
            raise BadRequest("'content' must be a string or a list of parts", "messages")
    return chars


def _optional_number(body: dict[str, Any], name: str, integer: bool) -> Any:
    """``body[name]`` if it is a number of the right kind (or absent), else BadRequest."""
    value = body.get(name)
    if value is None:
        return None
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise BadRequest(f"'{name}' must be a number", name)
    return value


def parse_chat_request(raw: bytes) -> ChatRequest:
    """Parse and validate a chat-completion body (raises BadRequest)."""
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise BadRequest(f"Invalid JSON body: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("The body must be a JSON object")
    images: list[str] = []
    texts: list[str] = []
    chars = _parse_messages(body.get("messages"), images, texts)
    param = "max_completion_tokens"
    max_tokens = _optional_number(body, param, True)
    if max_tokens is None:
        param = "max_tokens"
        max_tokens = _optional_number(body, param, True)
    if max_tokens is not None and max_tokens < 1:
        raise BadRequest(
            f"max_tokens must be at least 1, got {max_tokens}. "
            f"(parameter=max_tokens, value={max_tokens})",
            "max_tokens",
        )
    model = body.get("model")
    stream_options = body.get("stream_options") or {}
    return ChatRequest(
        model=model if isinstance(model, str) else None,
        text_chars=chars,
        images=tuple(images),
        temperature=_optional_number(body, "temperature", False),
        max_tokens=max_tokens,
        stream=bool(body.get("stream")),
        include_usage=bool(
            isinstance(stream_options, dict) and stream_options.get("include_usage")
        ),
        max_tokens_param=param,
        text="\n".join(texts),
        logprobs=body.get("logprobs") is True,
    )


# --------------------------------------------------------------------- responses
def error_response(
    status: int, message: str, err_type: str, param: str | None = None, **headers: str
) -> web.Response:
    """An OpenAI/vLLM error body: ``{"error": {message, type, param, code}}``."""
    body = {"error": {"message": message, "type": err_type, "param": param, "code": status}}
    return web.json_response(body, status=status, headers=headers or None)


def strict_overflow_response(
    cfg: ServerConfig, prompt_tokens: int, max_tokens: int
) -> web.Response:
    """Older vLLM's 400 for ``prompt + max_tokens > max_model_len`` (``--context-check strict``)."""
    message = (
        f"This model's maximum context length is {cfg.max_model_len} tokens. However, you "
        f"requested {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, "
        f"{max_tokens} in the completion). Please reduce the length of the messages or "
        "completion."
    )
    return error_response(400, message, "BadRequestError")


def _validation_error(message: str, param: str | None, value: int | None) -> web.Response:
    """vLLM 0.32's 400 for a ``VLLMValidationError`` (its text ends with the parameter)."""
    if param is not None:
        message = f"{message} (parameter={param}, value={value})"
    return error_response(400, message, "BadRequestError", param)


def text_too_long_response(cfg: ServerConfig) -> web.Response:
    """vLLM 0.32's 400 when the prompt's text alone exceeds ``max_model_len`` (it stops
    tokenizing at N+1 tokens, hence "at least")."""
    n = cfg.max_model_len
    message = (
        f"This model's maximum context length is {n} tokens. However, your prompt contains "
        f"at least {n + 1} input tokens, which exceeds this limit even without any output "
        "tokens. Please reduce the length of the input prompt."
    )
    return _validation_error(message, "input_tokens", n + 1)


def context_error(cfg: ServerConfig, req: ChatRequest) -> web.Response | None:
    """The 400 real vLLM 0.32 gives a request that cannot fit, or None (it will be clamped)."""
    n = cfg.max_model_len
    if req.max_tokens is not None and req.max_tokens > n:
        param = req.max_tokens_param
        message = (
            f"{param}={req.max_tokens} cannot be greater than max_model_len={n}. "
            "Please request fewer output tokens."
        )
        return _validation_error(message, param, req.max_tokens)
    if req.text_tokens() > n:
        return text_too_long_response(cfg)
    prompt = req.prompt_tokens()
    if prompt > n:
        message = f"Input length ({prompt}) exceeds model's maximum context length ({n})."
        return _validation_error(message, None, None)
    if prompt == n:  # the clamped budget is 0
        return _validation_error("max_tokens must be at least 1, got 0.", "max_tokens", 0)
    return None


def clamp_max_tokens(cfg: ServerConfig, req: ChatRequest, page_tokens: int) -> ChatRequest:
    """vLLM 0.32: ``max_tokens`` (by default the whole room) is cut to the room the prompt
    leaves in the context."""
    if cfg.context_check != "clamp":
        return req
    room = cfg.max_model_len - req.prompt_tokens()
    wanted = req.max_tokens if req.max_tokens is not None else max(page_tokens, room)
    if wanted <= room:
        return req
    return dataclasses.replace(req, max_tokens=room)


def completion_body(
    cfg: ServerConfig,
    content: str,
    finish: str,
    usage: dict[str, int],
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` object as vLLM returns it."""
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": cfg.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "tool_calls": []},
                "logprobs": logprobs,
                "finish_reason": finish,
                "stop_reason": None,
            }
        ],
        "usage": usage,
        "prompt_logprobs": None,
    }


def _sse(obj: Any) -> bytes:
    """One server-sent event line."""
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chunk(cid: str, cfg: ServerConfig, delta: dict[str, Any], finish: str | None) -> bytes:
    """A ``chat.completion.chunk`` event."""
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    obj = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": cfg.model,
        "choices": [choice],
    }
    return _sse(obj)


async def _close_and_wait(request: web.Request) -> web.StreamResponse:
    """Close the connection; the handler is then cancelled by aiohttp (safety cap 5 s)."""
    if request.transport is not None:
        request.transport.close()
    await asyncio.sleep(5)
    raise web.HTTPServiceUnavailable()


# --------------------------------------------------------------------- completion flow
@dataclass(frozen=True)
class Plan:
    """What the engine will produce for one request."""

    engine_tokens: int
    completion_tokens: int
    finish: str
    content: str


def make_plan(state: ServerState, req: ChatRequest, tags: list[str], fault: str | None) -> Plan:
    """Decide tokens, finish reason and content of a request's answer."""
    cfg = state.config
    page = state.page_tokens(tags)
    if fault == "length":
        reported = req.max_tokens or page
        return Plan(
            min(reported, page), reported, "length", length_fault_text(cfg.reply_format, tags, page)
        )
    if fault == "garbage":
        return Plan(page, page, "stop", garbage_text(state.rng, page))
    if cfg.figure_marker and cfg.figure_marker in req.text:
        text = figure_text(tags, req.text, req.temperature)
    elif cfg.second_pass_replies and req.text.strip() == FREE_OCR_PROMPT:
        text = region_text(tags)
    else:
        text = normal_text(cfg.reply_format, tags, req.temperature, page, cfg.figures_per_page)
        if cfg.second_pass_replies and _large_image(req):
            text += "\n\n" + table_region(tags)
        if cfg.echo_prompt:
            text = f"{req.text}\n{text}"
    if req.max_tokens is not None and req.max_tokens < page:
        return Plan(req.max_tokens, req.max_tokens, "length", cut_text(text, req.max_tokens))
    return Plan(page, page, "stop", text)


def early_answer(state: ServerState, req: ChatRequest, fault: str | None) -> web.Response | None:
    """Answers that need no engine: model check, injected errors, context overflow."""
    cfg = state.config
    if req.model is not None and req.model != cfg.model:
        state.outcomes["model_not_found"] += 1
        return error_response(
            404, f"The model `{req.model}` does not exist.", "NotFoundError", "model"
        )
    overflow = context_answer(cfg, req, fault)
    if overflow is not None:
        state.outcomes["context_overflow"] += 1
        return overflow
    if fault == "fail_500":
        state.outcomes["fail_500"] += 1
        return error_response(500, "Internal server error (injected)", "InternalServerError")
    if fault == "fail_503":
        state.outcomes["fail_503"] += 1
        return error_response(503, "Service unavailable (injected)", "ServiceUnavailableError")
    if fault == "fail_429":
        state.outcomes["fail_429"] += 1
        retry_after = str(max(0, math.ceil(state.faults.retry_after_s)))
        return error_response(
            429, "Too many requests (injected)", "RateLimitError", **{"Retry-After": retry_after}
        )
    return broken_answer(state, fault)


def broken_answer(state: ServerState, fault: str | None) -> web.Response | None:
    """A 200 that is not a usable completion (injected): ``content`` null or "", no
    ``choices``, or a body that is not JSON."""
    if fault not in ("null_content", "empty_content", "no_choices", "invalid_json"):
        return None
    state.outcomes[fault] += 1
    if fault == "invalid_json":
        cut = b'{"id": "chatcmpl-x", "choices": ['
        return web.Response(body=cut, content_type="application/json")
    usage = {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}
    body = completion_body(state.config, "", "stop", usage)
    if fault == "null_content":
        body["choices"][0]["message"]["content"] = None
    elif fault == "no_choices":
        body["choices"] = []
    return web.json_response(body)


def context_answer(cfg: ServerConfig, req: ChatRequest, fault: str | None) -> web.Response | None:
    """The 400 for a request that does not fit (or an injected one), by ``--context-check``."""
    if fault == "context_overflow":
        return text_too_long_response(cfg)
    if cfg.context_check == "clamp":
        return context_error(cfg, req)
    prompt = req.prompt_tokens()
    wanted = req.max_tokens or 0
    if prompt + wanted > cfg.max_model_len or prompt >= cfg.max_model_len:
        return strict_overflow_response(cfg, prompt, max(wanted, cfg.max_model_len - prompt + 1))
    return None


async def run_engine(state: ServerState, plan: Plan, prompt_tokens: int) -> None:
    """Wait for the engine to produce ``plan``; abort the sequence if the client leaves."""
    seq = state.engine.submit(plan.engine_tokens, prompt_tokens)
    try:
        await seq.future
    except asyncio.CancelledError:
        state.engine.cancel(seq)
        state.outcomes["aborted"] += 1
        state.finish_reasons["abort"] += 1
        raise


def account(
    state: ServerState, plan: Plan, fault: str | None, prompt_tokens: int
) -> dict[str, int]:
    """Record a finished answer in the counters; return its usage object."""
    state.outcomes[OUTCOME_NAMES.get(fault or "", plan.finish)] += 1
    state.finish_reasons[plan.finish] += 1
    state.prompt_tokens_total += prompt_tokens
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": plan.completion_tokens,
        "total_tokens": prompt_tokens + plan.completion_tokens,
    }


async def answer_plain(
    request: web.Request,
    state: ServerState,
    plan: Plan,
    fault: str | None,
    prompt: int,
    req: ChatRequest | None = None,
) -> web.StreamResponse:
    """Run the engine and send a non-streaming answer (possibly truncated)."""
    await run_engine(state, plan, prompt)
    usage = account(state, plan, fault, prompt)
    wanted = req is not None and req.logprobs
    scores = token_logprobs(plan.content, fault, req.temperature) if req and wanted else None
    body = completion_body(state.config, plan.content, plan.finish, usage, scores)
    body = json.dumps(body).encode()
    if fault != "truncate":
        return web.Response(body=body, content_type="application/json")
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    resp.content_length = len(body)
    await resp.prepare(request)
    await resp.write(body[: len(body) // 2])
    return await _close_and_wait(request)


async def answer_stream(
    request: web.Request, state: ServerState, plan: Plan, fault: str | None, prompt: int
) -> web.StreamResponse:
    """Send a streaming answer: role chunk now, content and finish when the engine is done."""
    cfg = state.config
    cid = "chatcmpl-" + uuid.uuid4().hex
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await resp.prepare(request)
    await resp.write(_chunk(cid, cfg, {"role": "assistant", "content": ""}, None))
    try:
        await run_engine(state, plan, prompt)
    except EngineDeadError:
        state.outcomes["dead"] += 1
        error = {"message": ENGINE_DEAD_MESSAGE, "type": "InternalServerError", "code": 500}
        await resp.write(_sse({"error": error}) + b"data: [DONE]\n\n")
        return resp
    usage = account(state, plan, fault, prompt)
    content = _chunk(cid, cfg, {"content": plan.content}, None)
    if fault == "truncate":
        await resp.write(content[: len(content) // 2])
        return await _close_and_wait(request)
    tail = _chunk(cid, cfg, {}, plan.finish)
    if request_wants_usage(request):
        tail += _sse(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "model": cfg.model,
                "choices": [],
                "usage": usage,
            }
        )
    await resp.write(content + tail + b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


def request_wants_usage(request: web.Request) -> bool:
    """Whether the streaming request asked for a usage chunk."""
    return bool(request.get("include_usage"))


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """``POST /v1/chat/completions``."""
    state = request.app[STATE]
    cfg = state.config
    state.received += 1
    if cfg.die_after is not None and state.received > cfg.die_after:
        os._exit(1)
    if cfg.dead_after is not None and state.received > cfg.dead_after and not state.engine.dead:
        state.engine.kill()
    if state.warming():
        state.outcomes["warming_up"] += 1
        return error_response(503, "The server is starting up", "ServiceUnavailableError")
    if state.engine.dead:
        state.outcomes["dead"] += 1
        return error_response(500, ENGINE_DEAD_MESSAGE, "InternalServerError")
    try:
        req = parse_chat_request(await request.read())
    except BadRequest as exc:
        state.outcomes["bad_request"] += 1
        return error_response(400, str(exc), "BadRequestError", exc.param)
    tags = count_images(state, req)
    fault = state.draw_fault()
    slow = state.draw_slow()
    early = early_answer(state, req, fault)
    if early is not None:
        return early
    if fault == "drop":
        state.outcomes["drop"] += 1
        return await _close_and_wait(request)
    if fault == "hang":
        return await hang(request, state)
    if slow:
        state.outcomes["slow"] += 1
        await asyncio.sleep(state.faults.slow_s)
    req = clamp_max_tokens(cfg, req, state.page_tokens(tags))
    plan = make_plan(state, req, tags, fault)
    prompt = req.prompt_tokens()
    request["include_usage"] = req.include_usage
    try:
        if req.stream:
            return await answer_stream(request, state, plan, fault, prompt)
        return await answer_plain(request, state, plan, fault, prompt, req)
    except EngineDeadError:
        state.outcomes["dead"] += 1
        return error_response(500, ENGINE_DEAD_MESSAGE, "InternalServerError")


def _large_image(req: ChatRequest) -> bool:
    """Whether the request's image is as long as DeepSeek-OCR's large mode."""
    sizes = [png_size(b64) for b64 in req.images]
    return any(size and max(size) >= LARGE_MODE_SIDE for size in sizes)


def count_images(state: ServerState, req: ChatRequest) -> list[str]:
    """The request's image tags, counted in ``/stats`` (figure requests also by figure)."""
    tags = [page_tag(b64) for b64 in req.images]
    state.images.update(tags)
    marker = state.config.figure_marker
    if marker and marker in req.text:
        state.figures.update(tags)
    return tags


async def hang(request: web.Request, state: ServerState) -> web.StreamResponse:
    """Answer nothing until the client leaves (aiohttp cancels us) or ``hang_s`` passes."""
    state.outcomes["hang"] += 1
    state.hanging += 1
    try:
        await asyncio.sleep(state.faults.hang_s)
    finally:
        state.hanging -= 1
    return await _close_and_wait(request)


# --------------------------------------------------------------------- other endpoints
async def models(request: web.Request) -> web.Response:
    """``GET /v1/models`` in vLLM's format."""
    cfg = request.app[STATE].config
    card = {
        "id": cfg.model,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "vllm",
        "root": cfg.model,
        "parent": None,
        "max_model_len": cfg.max_model_len,
        "permission": [],
    }
    return web.json_response({"object": "list", "data": [card]})


async def health(request: web.Request) -> web.Response:
    """``GET /health``: 200 empty when ready, 503 while warming up or dead."""
    state = request.app[STATE]
    if state.engine.dead or state.warming():
        return web.Response(status=503)
    return web.Response(status=200)


def render_metrics(state: ServerState) -> str:
    """Prometheus exposition text with vLLM's metric names."""
    labels = f'engine="0",model_name="{state.config.model}"'
    engine = state.engine
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for extra, value in samples:
            lines.append(f"{name}{{{labels}{extra}}} {float(value)}")

    metric(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        [("", engine.running)],
    )
    metric(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        [("", engine.waiting)],
    )
    usage = engine.kv_cache_usage()
    metric(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        [("", usage)],
    )
    metric(
        "vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage (deprecated name).", [("", usage)]
    )
    reasons = [
        (f',finished_reason="{r}"', state.finish_reasons[r]) for r in ("stop", "length", "abort")
    ]
    metric(
        "vllm:request_success_total",
        "counter",
        "Count of successfully processed requests.",
        reasons,
    )
    metric(
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        [("", state.prompt_tokens_total)],
    )
    metric(
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        [("", engine.generation_tokens)],
    )
    outcomes = [(f',outcome="{k}"', v) for k, v in sorted(state.outcomes.items())]
    metric("fakevllm:requests_total", "counter", "Completion requests by outcome.", outcomes)
    return "\n".join(lines) + "\n"


async def metrics(request: web.Request) -> web.Response:
    """``GET /metrics``."""
    text = render_metrics(request.app[STATE])
    return web.Response(text=text, content_type="text/plain", charset="utf-8")


def stats_json(state: ServerState) -> dict[str, Any]:
    """The ``/stats`` document."""
    cap = state.config.capacity
    tokens_per_s = cap.full_batch_tokens_per_s()
    return {
        "received": state.received,
        "outcomes": dict(state.outcomes),
        "finish_reasons": dict(state.finish_reasons),
        "images": dict(state.images),
        "figures": dict(state.figures),
        "hanging": state.hanging,
        "prompt_tokens": state.prompt_tokens_total,
        "engine": state.engine.snapshot(),
        "capacity": {
            "max_num_seqs": cap.max_num_seqs,
            "step_base_s": cap.step_base_s,
            "step_per_seq_s": cap.step_per_seq_s,
            "full_batch_tokens_per_s": tokens_per_s,
            "full_batch_pages_per_s": tokens_per_s / state.config.tokens_per_page,
            "tokens_per_page": state.config.tokens_per_page,
        },
        "faults": dataclasses.asdict(state.faults),
        "cpu_s": time.process_time(),
        "uptime_s": time.monotonic() - state.started,
    }


async def stats(request: web.Request) -> web.Response:
    """``GET /stats``: JSON counters for tests."""
    return web.json_response(stats_json(request.app[STATE]))


async def admin_faults(request: web.Request) -> web.Response:
    """``GET``/``POST /admin/faults``: read or change fault settings."""
    state = request.app[STATE]
    if request.method == "POST":
        try:
            changes = await request.json()
            if not isinstance(changes, dict):
                raise ValueError("expected a JSON object")
            state.faults.update(changes)
        except ValueError as exc:
            return error_response(400, str(exc), "BadRequestError")
    return web.json_response(dataclasses.asdict(state.faults))


async def version(_request: web.Request) -> web.Response:
    """``GET /version``."""
    return web.json_response({"version": "0.0.0+fakevllm"})


# --------------------------------------------------------------------- app and CLI
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
