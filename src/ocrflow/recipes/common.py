"""Request and reply checks every recipe shares."""

from __future__ import annotations

from typing import Any

from ocrflow.errors import ParseError
from ocrflow.recipes.text import detect_repetition
from ocrflow.types import EngineReply, PageImage, PageRequest

#: ``ParseError.reason`` when the reply stopped before its end (``finish_reason`` length).
TRUNCATED = "truncated"
#: ``ParseError.reason`` when the reply holds a generation loop.
REPETITION = "repetition"
#: ``ParseError.reason`` when the reply does not follow the model's output format.
MALFORMED = "parse_error"


def pick_temperature(temperatures: tuple[float, ...], attempt: int) -> float:
    """The temperature of ``attempt`` (0-based); attempts past the ladder keep the last."""
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    if not temperatures:
        return 0.0
    return temperatures[min(attempt, len(temperatures) - 1)]


def attempt_request(
    recipe: Any,
    image: PageImage,
    attempt: int,
    *,
    prompt: str | None,
    image_first: bool,
    extra_body: dict[str, Any],
    max_tokens: int | None,
    page_key: str,
) -> PageRequest:
    """The request for one attempt: the recipe's temperature ladder and token budget applied."""
    return PageRequest(
        image=image,
        prompt=prompt,
        image_first=image_first,
        temperature=pick_temperature(recipe.temperatures, attempt),
        max_tokens=max_tokens or recipe.max_tokens,
        extra_body=extra_body,
        page_key=page_key,
    )


def require_stop(reply: EngineReply) -> None:
    """Raise ``ParseError`` unless the model ended its reply on its own."""
    if reply.finish_reason == "length":
        raise ParseError("reply cut off at max_tokens (finish_reason length)", reason=TRUNCATED)
    if reply.finish_reason != "stop":
        raise ParseError(f"reply ended with finish_reason {reply.finish_reason!r}")


def reject_loop(text: str) -> None:
    """Raise ``ParseError`` when ``text`` holds a generation loop."""
    if detect_repetition(text):
        raise ParseError("reply holds a repetition loop", reason=REPETITION)
