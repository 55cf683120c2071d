"""The ``mineru`` recipe: MinerU2.5's layout step, its crop requests and the page they make.

The published output is MinerU's own (tests/data/recipes/mineru/README.md): a page's
blocks with their layout type, box and crop content. Its layout is written back in the
model's reply format; the recipe must find the same types and boxes (within 1 % of the
page) and, answered with the same contents, give the page MinerU gives.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading

import pytest
from PIL import Image

from ocrflow.errors import EngineRejected, ParseError
from ocrflow.readers.steps import PageSteps, run_steps
from ocrflow.recipes.base import ParsedPage, StepAnswer, is_step_recipe
from ocrflow.recipes.mineru import DEFAULT_PROMPT, LAYOUT_PROMPT, LAYOUT_SIZE, MineruRecipe
from ocrflow.recipes.mineru_blocks import parse_layout
from ocrflow.recipes.registry import recipe_for_model
from ocrflow.render.jobs import encode_image
from ocrflow.types import BlockLabel, EngineReply, PageImage, PageKey, PageRequest

from .helpers import DATA, reply

SAMPLE = json.loads((DATA / "mineru" / "model_sample.json").read_text())[0]


def _layout_reply(blocks: list[dict]) -> str:
    """The layout reply that gives ``blocks``: boxes on the 0-1000 grid, MinerU's tokens."""
    lines = []
    for block in blocks:
        x0, y0, x1, y1 = (round(v * 1000) for v in block["bbox"])
        lines.append(
            f"<|box_start|>{x0:03d} {y0:03d} {x1:03d} {y1:03d}<|box_end|>"
            f"<|ref_start|>{block['type']}<|ref_end|><|rotate_up|>"
        )
    return "\n".join(lines)


def _page(width: int = 1000, height: int = 1400) -> PageImage:
    picture = Image.new("RGB", (width, height), "white")
    return encode_image(picture, "png")


def _size(image: PageImage) -> tuple[int, int]:
    return Image.open(io.BytesIO(image.data)).size


def test_model_names_pick_the_recipe_and_it_has_steps() -> None:
    recipe = recipe_for_model("opendatalab/MinerU2.5-2509-1.2B")
    assert isinstance(recipe, MineruRecipe) and is_step_recipe(recipe)
    assert "mineru_vl_utils:MinerULogitsProcessor" in recipe.server_flags


def test_published_layout_gives_its_types_and_boxes() -> None:
    parsed = MineruRecipe().parse(reply(_layout_reply(SAMPLE)))
    layout = parsed.attributes["layout"]
    assert [row[0] for row in layout] == [b["type"] for b in SAMPLE]
    for row, block in zip(layout, SAMPLE, strict=True):
        assert row[1] == pytest.approx(block["bbox"], abs=0.01)
        assert row[2] == block["angle"]


def test_published_contents_make_mineru_s_page() -> None:
    recipe = MineruRecipe()
    parsed = recipe.parse(reply(_layout_reply(SAMPLE)))
    steps = recipe.step_requests(_page(), parsed)
    assert [s.kind for s in steps] == ["header", "title"]
    answers = {
        s.key: StepAnswer(s.key, recipe.parse_step(s, reply(b["content"])))
        for s, b in zip(steps, SAMPLE, strict=True)
    }
    page = recipe.combine(parsed, answers)
    # The header is page furniture: a block, not Markdown.
    assert page.markdown == "# The response of flow duration curves to afforestation"
    assert page.attributes["page_header"] == ["ELSEVIER"]
    assert [b.label for b in page.blocks] == [BlockLabel.PAGE_HEADER, BlockLabel.TITLE]
    for block, sample in zip(page.blocks, SAMPLE, strict=True):
        assert block.bbox == pytest.approx(sample["bbox"], abs=0.01)
    assert page.blocks[0].text == "ELSEVIER"


def test_layout_rules_follow_the_client() -> None:
    text = (
        "<|box_start|>100 100 900 500<|box_end|><|ref_start|>table<|ref_end|><|rotate_up|>\n"
        "<|box_start|>150 150 800 300<|box_end|><|ref_start|>text<|ref_end|><|rotate_up|>\n"
        "<|box_start|>100 550 900 600<|box_end|><|ref_start|>text<|ref_end|><|rotate_up|>\n"
        "<|box_start|>100 600 900 650<|box_end|><|ref_start|>text<|ref_end|>"
        "<|rotate_up|>txt_contd_tgt\n"
        "<|box_start|>100 700 300 900<|box_end|><|ref_start|>unknown<|ref_end|><|rotate_right|>\n"
        "<|box_start|>1 1 20 20<|box_end|><|ref_start|>inline_formula<|ref_end|>\n"
        "<|box_start|>0 0 1200 50<|box_end|><|ref_start|>text<|ref_end|>\n"
        "<|box_start|>10 10 10 50<|box_end|><|ref_start|>text<|ref_end|>\n"
        "<|box_start|>10 10 50 50<|box_end|><|ref_start|>made_up<|ref_end|>\n"
    )
    blocks = parse_layout(text)
    # The text inside the table, the inline formula, the out-of-range and empty boxes and
    # the unknown type are gone; "unknown" reads as an image turned by 90 degrees.
    assert [(b.type, b.angle, b.merge_prev) for b in blocks] == [
        ("table", 0, False),
        ("text", 0, False),
        ("text", 0, True),
        ("image", 90, False),
    ]
    assert blocks[0].bbox == (0.1, 0.1, 0.9, 0.5)


def test_requests_follow_the_client() -> None:
    recipe = MineruRecipe()
    layout = recipe.first_image(_page())
    assert _size(layout) == LAYOUT_SIZE
    request = recipe.build_request(layout, 0)
    assert request.prompt == LAYOUT_PROMPT and request.image_first
    assert request.extra_body["vllm_xargs"] == {"no_repeat_ngram_size": 100}
    assert request.extra_body["top_p"] == 0.01 and request.temperature == 0.0
    text = (
        "<|box_start|>100 100 900 150<|box_end|><|ref_start|>title<|ref_end|><|rotate_up|>"
        "<|box_start|>100 200 900 400<|box_end|><|ref_start|>table<|ref_end|><|rotate_up|>"
        "<|box_start|>100 450 900 480<|box_end|><|ref_start|>equation<|ref_end|><|rotate_up|>"
        "<|box_start|>100 500 101 900<|box_end|><|ref_start|>aside_text<|ref_end|>"
        "<|rotate_left|>"
        "<|box_start|>100 600 900 900<|box_end|><|ref_start|>image<|ref_end|><|rotate_up|>"
        "<|box_start|>200 850 800 880<|box_end|><|ref_start|>image_caption<|ref_end|>"
        "<|rotate_up|>"
    )
    parsed = recipe.parse(reply(text))
    steps = recipe.step_requests(_page(1000, 1400), parsed)
    # The image is not read (no image analysis); its inner caption is dropped.
    assert [s.kind for s in steps] == ["title", "table", "equation", "aside_text"]
    prompts = [recipe.build_step_request(s, 0).prompt for s in steps]
    assert prompts == [
        DEFAULT_PROMPT,
        "\nTable Recognition:",
        "\nFormula Recognition:",
        DEFAULT_PROMPT,
    ]
    # Cut at the page's own resolution; the aside text (1 px wide, turned by 270) is
    # turned upright, padded to the 1:50 ratio and enlarged to 28 px on its short side.
    assert _size(steps[0].image) == (800, 70)
    assert _size(steps[1].image) == (800, 280)
    aside = _size(steps[3].image)
    assert min(aside) == 28 and aside[0] > aside[1]
    assert recipe.build_step_request(steps[1], 0).extra_body["frequency_penalty"] == 0.005


def test_crop_replies_are_read_and_checked() -> None:
    recipe = MineruRecipe()
    parsed = recipe.parse(
        reply("<|box_start|>100 100 900 500<|box_end|><|ref_start|>table<|ref_end|>")
    )
    (step,) = recipe.step_requests(_page(), parsed)
    otsl = "<fcel>item<fcel>value<nl><fcel>total<fcel>42<nl>"
    html = recipe.parse_step(step, reply(otsl))
    assert "<table>" in html and "<td>total</td>" in html and "<td>42</td>" in html
    with pytest.raises(ParseError):
        recipe.parse_step(step, reply("the table of the " * 40))
    with pytest.raises(ParseError):
        recipe.parse_step(step, reply(otsl, finish_reason="length"))


def test_layout_without_blocks_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        MineruRecipe().parse(reply("no layout here"))


class _Store:
    """Step checkpoints in memory, counting writes."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, int], dict] = {}
        self.writes = 0

    def save_steps(self, doc_id: str, page: int, record: dict) -> None:
        self.records[(doc_id, page)] = json.loads(json.dumps(record))
        self.writes += 1

    def load_steps(self, doc_id: str, page: int) -> dict | None:
        return self.records.get((doc_id, page))


def _three_blocks() -> ParsedPage:
    text = "".join(
        f"<|box_start|>100 {y} 900 {y + 50}<|box_end|><|ref_start|>text<|ref_end|><|rotate_up|>"
        for y in (100, 300, 500)
    )
    return MineruRecipe().parse(reply(text))


def test_steps_fail_per_block_and_resume_from_their_checkpoint() -> None:
    recipe, page, parsed = MineruRecipe(), _page(), _three_blocks()
    store, key = _Store(), PageKey("doc", 1)
    asked: list[str] = []

    async def ask(request: PageRequest) -> EngineReply:
        name = f"crop-{_size(request.image)}-{len(asked)}"
        asked.append(name)
        if len(asked) == 2:
            raise EngineRejected("refused")  # the second crop is refused: its block fails
        return EngineReply(f"text {len(asked)}")

    async def first_run() -> ParsedPage:
        steps = await PageSteps.open(store, key)
        await steps.save_first(reply("layout", image_width=1036, image_height=1036))
        return await run_steps(recipe, page, parsed, steps, ask)

    done = asyncio.run(first_run())
    assert len(asked) == 3
    failed = [b for b in done.blocks if b.source_label == "text:failed"]
    assert len(failed) == 1 and failed[0].confidence == 0.0 and failed[0].bbox is not None
    assert done.attributes["failed_blocks"][0]["reason"].startswith("engine_error")
    assert done.attributes["steps"] == {"requests": 3, "resumed": 0, "failed": 1}
    assert store.writes <= 4  # the first reply, then coalesced answers

    async def second_run() -> ParsedPage:
        steps = await PageSteps.open(store, key)
        assert steps.first_reply() is not None and steps.first_reply().text == "layout"
        return await run_steps(recipe, page, parsed, steps, ask)

    again = asyncio.run(second_run())
    assert len(asked) == 3, "answered (and failed) steps are not asked again"
    assert again.markdown == done.markdown
    assert again.attributes["steps"]["resumed"] == 3


def test_a_cancelled_page_s_step_saves_land_before_the_cancellation_goes_on() -> None:
    # A worker that lost its lease is cancelled, then drops the checkpoints it wrote late:
    # a coalesced save still running then would land after that cleanup and stay.
    recipe, page, parsed = MineruRecipe(), _page(), _three_blocks()
    entered, gate = threading.Event(), threading.Event()

    class GatedStore(_Store):
        def save_steps(self, doc_id: str, page: int, record: dict) -> None:
            entered.set()
            assert gate.wait(10)
            super().save_steps(doc_id, page, record)

    store = GatedStore()

    async def scenario() -> bool:
        never, asked = asyncio.Event(), []

        async def ask(request: PageRequest) -> EngineReply:
            asked.append(request)
            if len(asked) == 1:
                return EngineReply("the first block")  # answered: its save starts
            await never.wait()  # the other blocks are still out when the page is cancelled
            raise AssertionError("unreachable")

        steps = PageSteps(store, PageKey("doc", 1), None)
        running = asyncio.create_task(run_steps(recipe, page, parsed, steps, ask))
        assert await asyncio.to_thread(entered.wait, 10)
        running.cancel()
        await asyncio.sleep(0.2)
        waited = not running.done()
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await running
        return waited

    assert asyncio.run(scenario())  # the former code let the cancellation through at once
    (record,) = store.records.values()
    assert [a["text"] for a in record["answers"].values()] == ["the first block"]
