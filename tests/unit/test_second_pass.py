"""Region second passes: the checks on a second read, the rebuilt reply, and what happens
when a second read fails or misses its label (the first read stays, with the reason)."""

from __future__ import annotations

import asyncio
import io

import pytest
from PIL import Image, ImageDraw

from ocrflow.errors import ConfigError, EngineUnavailable
from ocrflow.readers.second_pass import (
    SecondPass,
    check_region_text,
    rebuild_reply,
    second_pass_for,
)
from ocrflow.recipes.deepseek import DeepseekRecipe, split_regions
from ocrflow.recipes.olmocr import OlmocrRecipe
from ocrflow.types import EngineReply, PageImage, PageRequest

REPLY = (
    "<|ref|>title<|/ref|><|det|>[[62, 41, 937, 88]]<|/det|>\n# Quarterly Report\n\n"
    "<|ref|>text<|/ref|><|det|>[[62, 100, 937, 300]]<|/det|>\n"
    "Revenue grew by 12 % on the year, driven by the services segment.\n\n"
    "<|ref|>image<|/ref|><|det|>[[90, 320, 520, 610]]<|/det|>\n\n"
    "<|ref|>table_caption<|/ref|><|det|>[[90, 620, 520, 640]]<|/det|>\nTable 1: Results"
)


def _ruled_png() -> PageImage:
    picture = Image.new("RGB", (990, 1280), "white")
    draw = ImageDraw.Draw(picture)
    for y in (300, 420, 540, 660):
        draw.line((80, y, 900, y), fill="black", width=2)
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return PageImage(buffer.getvalue(), 990, 1280, "png")


def test_a_rebuilt_reply_parses_to_the_same_page() -> None:
    recipe = DeepseekRecipe()
    original = recipe.parse(EngineReply(REPLY))
    rebuilt = recipe.parse(EngineReply(rebuild_reply(split_regions(REPLY))))
    assert rebuilt.markdown == original.markdown
    assert [f.bbox for f in rebuilt.figures] == [f.bbox for f in original.figures]
    head = "Loose text before any region.\n\n" + REPLY
    assert recipe.parse(EngineReply(rebuild_reply(split_regions(head)))).markdown.startswith(
        "Loose text before any region.\n\n# Quarterly Report"
    )


@pytest.mark.parametrize(
    ("old", "new", "verdict"),
    [
        ("Quarterly Report", "Quarterly Report 2024", None),
        ("# Q", "Quarterly Report 2024", None),  # short: the slack allows it
        ("Revenue grew", "  \n ", "empty"),
        ("Revenue grew by 12 %", "<table><tr><td></td></tr></table>", "empty"),
        ("a" * 300, "b" * 100, "length ratio 0.33 outside 0.5-2.0"),
        ("a" * 100, "b" * 300, "length ratio 3.00 outside 0.5-2.0"),
        ("", "Text the first read missed.", None),
        ("Total", "the total " * 60, "repetition loop"),
    ],
)
def test_the_checks_on_a_second_read(old: str, new: str, verdict: str | None) -> None:
    assert check_region_text(old, new) == verdict


def test_second_passes_need_the_grounding_recipe() -> None:
    assert second_pass_for(DeepseekRecipe(), (), 0) is None
    with pytest.raises(ConfigError, match="need the deepseek recipe"):
        second_pass_for(OlmocrRecipe(), ("table",), 0)
    with pytest.raises(ConfigError, match="grounding"):
        second_pass_for(DeepseekRecipe(mode="free"), (), 2)
    made = second_pass_for(DeepseekRecipe(), ("figure", "title"), 0)
    assert made is not None and made.roi_labels == frozenset({"image", "title"})


def _refine(second: SecondPass, ask: object) -> tuple[dict[str, object], str]:
    recipe = second.recipe
    first = recipe.parse(EngineReply(REPLY))
    refined = asyncio.run(second.refine(_ruled_png(), EngineReply(REPLY), first, ask))  # type: ignore[arg-type]
    return refined.attributes.get("second_pass", {}), refined.markdown


def test_a_failed_region_read_keeps_the_first_read_and_says_why() -> None:
    async def ask(request: PageRequest) -> EngineReply:
        raise EngineUnavailable("connection refused")

    record, markdown = _refine(SecondPass(DeepseekRecipe(), frozenset({"title"})), ask)
    assert record == {
        "roi": [
            {
                "label": "title",
                "box": "[[62, 41, 937, 88]]",
                "accepted": False,
                "reason": "second read failed: connection refused",
            }
        ]
    }
    assert markdown.startswith("# Quarterly Report")


def test_a_large_read_without_the_table_is_not_kept_and_counts_against_the_cap() -> None:
    sizes: list[int] = []

    async def ask(request: PageRequest) -> EngineReply:
        sizes.append(max(request.image.width, request.image.height))
        return EngineReply(REPLY.replace("Quarterly Report", "Quarterly Report (large)"))

    second = SecondPass(DeepseekRecipe(), retry_large_cap=1)
    record, markdown = _refine(second, ask)
    assert record == {
        "large_retry": {
            "missing": ["table"],
            "dim": 1280,
            "accepted": False,
            "reason": "the large read has no table either",
        }
    }
    assert markdown.startswith("# Quarterly Report\n") and sizes == [1280]
    record, _ = _refine(second, ask)
    assert record["large_retry"]["reason"] == "cap of 1 pages reached"  # type: ignore[index]
    assert sizes == [1280] and second.retries_used == 1


def test_the_options_are_refused_early_for_another_recipe_and_fingerprinted_when_set() -> None:
    from pydantic import ValidationError

    from ocrflow.config import EngineOptions, PassOptions, RunConfig

    olmocr = EngineOptions(kind="openai", model="m", recipe="olmocr")
    with pytest.raises(ValidationError, match="need the deepseek recipe"):
        RunConfig(inputs=("a",), output="o", engine=olmocr, passes=PassOptions(retry_large_cap=2))
    deepseek = EngineOptions(kind="openai", model="m", recipe="deepseek")
    plain = RunConfig(inputs=("a",), output="o", engine=deepseek)
    roi = plain.model_copy(update={"passes": PassOptions(roi_labels=("table",))})
    assert not ({"roi_labels", "retry_large_cap", "required_labels", "clean"}
                & set(plain.fingerprint_fields()))  # fmt: skip
    assert roi.fingerprint_fields()["roi_labels"] == ["table"]
    assert roi.fingerprint() != plain.fingerprint()
