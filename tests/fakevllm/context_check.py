"""vLLM's context-length check: the 400s for a request that cannot fit, and the clamp.

``--context-check clamp`` (vLLM 0.32, the default) refuses only what cannot fit at all and
cuts ``max_tokens`` to the room the prompt leaves; ``--context-check strict`` (older vLLM
and other servers) refuses whenever prompt plus ``max_tokens`` exceeds ``max_model_len``.
The wordings are vLLM's (see ``server.py``'s docstring for each).
"""

from __future__ import annotations

import dataclasses

from aiohttp import web

from tests.fakevllm.chat_request import ChatRequest
from tests.fakevllm.responses import error_response
from tests.fakevllm.state import ServerConfig


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
