"""A reply without text for a page that is not blank is a failed attempt, never an ``ok``
page with empty text; and ``EngineFailing`` goes up to stop the run instead of falling back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ocrflow.errors import EngineFailing
from ocrflow.recipes.olmocr import TEMPERATURES
from ocrflow.types import EngineReply, PageStatus, Reason, Route
from tests.unit.test_vlm_reader import ScriptedEngine, good, page, read


def empty(text: str = "") -> EngineReply:
    return EngineReply(text=text, finish_reason="stop", tokens_in=10, tokens_out=0)


@pytest.mark.parametrize("text", ["", "  \n\t "])
def test_an_empty_reply_is_retried_at_the_next_temperature(tmp_path: Path, text: str) -> None:
    engine = ScriptedEngine([empty(text), good("Read on the second attempt.")])
    result = read(engine, tmp_path)
    assert result.route is Route.ENGINE and result.status is PageStatus.OK
    assert "second attempt" in result.text
    assert result.attempts == 2
    assert engine.temperatures == list(TEMPERATURES[:2])


def test_only_empty_replies_fail_the_page_with_empty_reply(tmp_path: Path) -> None:
    engine = ScriptedEngine([empty()])
    result = read(engine, tmp_path)
    assert len(engine.requests) == len(TEMPERATURES)  # every attempt was spent
    assert result.status is PageStatus.FAILED and result.route is Route.FALLBACK
    assert result.reason == Reason.EMPTY_REPLY
    assert "no text" in (result.error or "")
    assert result.text == ""


def test_a_fallback_after_empty_replies_keeps_the_reason(tmp_path: Path) -> None:
    cpu = ScriptedEngine([EngineReply(text="Text the CPU engine read.", finish_reason="stop")])
    result = read(ScriptedEngine([empty()]), tmp_path, fallback=cpu)
    assert result.route is Route.FALLBACK and result.status is PageStatus.OK
    assert result.text == "Text the CPU engine read."
    assert result.reason == Reason.EMPTY_REPLY


def test_an_empty_fallback_is_not_ok_either(tmp_path: Path) -> None:
    cpu = ScriptedEngine([EngineReply(text="", finish_reason="stop")])
    result = read(ScriptedEngine([empty()]), tmp_path, fallback=cpu)
    assert result.status is PageStatus.FAILED and result.text == ""


def test_a_text_layer_fallback_after_empty_replies(tmp_path: Path) -> None:
    rendered = page(text="The native text of the page.", text_ok=True)
    result = read(ScriptedEngine([empty()]), tmp_path, rendered=rendered)
    assert result.status is PageStatus.OK and result.text == "The native text of the page."
    assert result.reason == Reason.EMPTY_REPLY


def test_engine_failing_is_not_a_page_failure(tmp_path: Path) -> None:
    """Every server failed too long: the page stays pending (the run stops), no fallback."""
    cpu = ScriptedEngine([EngineReply(text="never used", finish_reason="stop")])
    engine = ScriptedEngine([EngineFailing("every server failed every request for 120 s")])
    with pytest.raises(EngineFailing):
        read(engine, tmp_path, fallback=cpu)
    assert cpu.requests == []
