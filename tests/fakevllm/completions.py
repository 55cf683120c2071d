"""``POST /v1/chat/completions``: faults drawn, the answer planned, the engine awaited.

A request is parsed (``chat_request``), its images counted, its faults drawn; answers that
need no engine (wrong model, context overflow, injected errors and broken 200s) go at
once; the others become a ``Plan`` whose tokens the engine produces before the answer is
sent, plain or streamed.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import uuid
from dataclasses import dataclass

from aiohttp import web

from tests.fakevllm.chat_request import BadRequest, ChatRequest, parse_chat_request
from tests.fakevllm.context_check import clamp_max_tokens, context_answer
from tests.fakevllm.engine import EngineDeadError
from tests.fakevllm.replies import (
    FREE_OCR_PROMPT,
    LARGE_MODE_SIDE,
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
from tests.fakevllm.responses import (
    ENGINE_DEAD_MESSAGE,
    close_and_wait,
    completion_body,
    completion_chunk,
    error_response,
    sse_event,
)
from tests.fakevllm.state import STATE, ServerState

#: ``/stats`` outcome names of injected faults that still produce an answer
OUTCOME_NAMES = {"truncate": "truncate", "length": "length_fault", "garbage": "garbage"}


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
    return await close_and_wait(request)


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
    await resp.write(completion_chunk(cid, cfg, {"role": "assistant", "content": ""}, None))
    try:
        await run_engine(state, plan, prompt)
    except EngineDeadError:
        state.outcomes["dead"] += 1
        error = {"message": ENGINE_DEAD_MESSAGE, "type": "InternalServerError", "code": 500}
        await resp.write(sse_event({"error": error}) + b"data: [DONE]\n\n")
        return resp
    usage = account(state, plan, fault, prompt)
    content = completion_chunk(cid, cfg, {"content": plan.content}, None)
    if fault == "truncate":
        await resp.write(content[: len(content) // 2])
        return await close_and_wait(request)
    tail = completion_chunk(cid, cfg, {}, plan.finish)
    if request_wants_usage(request):
        tail += sse_event(
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
        return await close_and_wait(request)
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
    return await close_and_wait(request)
