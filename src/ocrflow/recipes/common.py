"""Reply checks every recipe shares."""

from __future__ import annotations

from ocrflow.errors import ParseError
from ocrflow.recipes.text import detect_repetition
from ocrflow.types import EngineReply

#: ``ParseError.reason`` when the reply stopped before its end (``finish_reason`` length).
TRUNCATED = "truncated"
#: ``ParseError.reason`` when the reply holds a generation loop.
REPETITION = "repetition"
#: ``ParseError.reason`` when the reply does not follow the model's output format.
MALFORMED = "parse_error"


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
