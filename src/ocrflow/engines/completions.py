"""The wire side of OpenAI chat completions: server URLs checked, answers classified into
typed errors, replies parsed. Pure functions of an ``httpx`` response or a decoded body;
``OpenAIEngine`` (``openai.py``) owns the connections, slots and replicas."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx

from ocrflow.document.confidence import mean_token_prob
from ocrflow.errors import ConfigError, EngineRejected, EngineUnavailable
from ocrflow.types import EngineReply, PageRequest

#: vLLM 0.32's 400s for a request that does not fit (it clamps ``max_tokens`` to the room
#: the prompt leaves): "This model's maximum context length is N tokens. However, your
#: prompt contains …", "Input length (P) exceeds model's maximum context length (N).",
#: "max_tokens=M cannot be greater than max_model_len=N" and, for a prompt of exactly N
#: tokens, "max_tokens must be at least 1, got 0". All are fixed by a smaller image or
#: fewer output tokens (the reader shrinks both).
_CONTEXT_OVERFLOW_MARKERS = (
    "maximum context length",
    "max_model_len",
    "context length",
    "maximum model length",
    "max_tokens must be at least 1, got 0",
)


class ServerFailure(EngineUnavailable):
    """The server failed a request (no answer, 408/429/5xx, a body that is not a
    completion). ``cause`` says how, without the URL: the circuit breaker's words."""

    def __init__(self, url: str, cause: str) -> None:
        super().__init__(f"{url}: {cause}")
        self.cause = cause


def check_url(url: str) -> None:
    """Refuse a server URL that httpx could never connect to (a usage error, exit 2)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ConfigError(f"--server {url!r} is not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigError(f"--server {url!r} must be an http:// or https:// URL with a host")


def v1(url: str) -> str:
    """The OpenAI base URL (…/v1) of a server URL given with or without it."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else f"{url}/v1"


def completion_body(answer: httpx.Response, url: str) -> dict[str, Any]:
    """The decoded body of a 200, else the typed error its status means.

    429/503: overloaded (``ServerFailure``: back off); 408/5xx: failed (``ServerFailure``);
    any other 4xx: ``EngineRejected`` (a 400 naming the context length is fixable by a
    smaller request).
    """
    status = answer.status_code
    if status == 200:
        try:
            body = answer.json()
        except ValueError as exc:
            raise ServerFailure(url, f"HTTP 200 with a body that is not JSON ({exc})") from exc
        if not isinstance(body, dict):
            raise ServerFailure(url, f"HTTP 200 with a body that is not an object: {_cut(body)}")
        return body
    detail = error_text(answer)
    if status in (429, 503):
        raise ServerFailure(url, f"overloaded: HTTP {status}: {detail}")
    if status >= 500 or status == 408:
        raise ServerFailure(url, f"HTTP {status}: {detail}")
    overflow = status == 400 and any(m in detail.lower() for m in _CONTEXT_OVERFLOW_MARKERS)
    raise EngineRejected(
        f"{url} rejected the request ({status}): {detail}",
        context_overflow=overflow,
        status=status,
    )


def error_text(answer: httpx.Response) -> str:
    """The message of an error body (OpenAI's ``{"error": {"message": …}}`` or plain text)."""
    try:
        body = answer.json()
        error = body.get("error", body) if isinstance(body, dict) else body
        message = error.get("message", error) if isinstance(error, dict) else error
        return str(message)[:500]
    except ValueError:
        return answer.text[:500]


def parse_reply(payload: dict[str, Any], latency: float, engine: str, url: str) -> EngineReply:
    """The reply of a completion body. A body without a choice or a message is a server
    failure; a message without text (``content`` null or "") is a reply with empty text,
    which the reader judges (an empty reply for a page is a content failure)."""
    try:
        choice = payload["choices"][0]
        message = choice["message"]
        text = message.get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ServerFailure(url, f"a completion without a choice: {_cut(payload)}") from exc
    if not isinstance(text, str):
        raise ServerFailure(url, f"a completion whose content is not text: {_cut(text)}")
    usage = payload.get("usage") or {}
    scored = token_probability(choice.get("logprobs"))
    return EngineReply(
        text=text,
        finish_reason=choice.get("finish_reason") or "stop",
        tokens_in=int(usage.get("prompt_tokens") or 0),
        tokens_out=int(usage.get("completion_tokens") or 0),
        latency_s=latency,
        engine=engine,
        attributes=scored,
    )


def token_probability(logprobs: object) -> dict[str, Any]:
    """``mean_token_prob`` (``exp`` of the mean token logprob) and ``logprob_tokens`` of a
    choice's ``logprobs`` (``{"content": [{"token", "logprob", ...}, ...]}``, present when
    the request asked for ``logprobs``); ``{}`` when the server sent none."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list):
        return {}
    values = [t.get("logprob") for t in content if isinstance(t, dict)]
    mean = mean_token_prob([v for v in values if isinstance(v, int | float)])
    return {} if mean is None else {"mean_token_prob": mean, "logprob_tokens": len(values)}


def _cut(value: object) -> str:
    return str(value)[:200]


def request_body(
    request: PageRequest, model: str, max_model_len: int | None = None, *, logprobs: bool = False
) -> bytes:
    """The chat-completion request for a page, as JSON bytes.

    ``max_tokens`` is capped at the server's context length: vLLM clamps it to the room
    the prompt leaves, but answers 400 to a value above the whole context. ``logprobs``
    asks for each output token's logprob (``--logprobs``; see docs/confidence.md for what
    it costs).
    """
    image = base64.b64encode(request.image.data).decode("ascii")
    image_part = {
        "type": "image_url",
        "image_url": {"url": f"data:{request.image.media_type};base64,{image}"},
    }
    parts: list[dict[str, Any]] = [image_part]
    if request.prompt:
        text_part = {"type": "text", "text": request.prompt}
        parts = [image_part, text_part] if request.image_first else [text_part, image_part]
    body = {
        "model": model,
        "messages": [{"role": "user", "content": parts}],
        "temperature": request.temperature,
        "max_tokens": min(request.max_tokens, max_model_len or request.max_tokens),
        **({"logprobs": True} if logprobs else {}),
        **request.extra_body,
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
