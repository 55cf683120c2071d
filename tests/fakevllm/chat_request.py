"""Parsing and validating a chat-completion request, and estimating its prompt tokens.

Only what the fake server answers from is kept (``ChatRequest``): the model name, the text,
the images' base64 payloads, the sampling and budget parameters. A malformed body raises
``BadRequest``, which the completions handler answers with a 400.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

#: chars of prompt text per estimated token, and base64 bytes per estimated image token
TEXT_CHARS_PER_TOKEN = 4
B64_BYTES_PER_IMAGE_TOKEN = 750


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
