"""Blocks on their way from an engine or recipe to the page result: through the VLM reader
(figure placeholders, pages the model asked to turn), the plain reader, fallbacks, the
text-layer route and the clean pass."""

from __future__ import annotations

import asyncio

import pytest

from ocrflow.pipeline.route import settled_page
from ocrflow.readers.markdown_clean import clean_page
from ocrflow.readers.plain import PlainReader
from ocrflow.readers.vlm import VlmReader
from ocrflow.recipes.deepseek import GRID, DeepseekRecipe
from ocrflow.recipes.olmocr import OlmocrRecipe
from ocrflow.render.jobs import RenderedPage
from ocrflow.types import (
    Block,
    BlockLabel,
    EngineReply,
    ImageSize,
    Line,
    PageKey,
    PageResult,
    Route,
    unturn_box,
)
from tests.unit.test_vlm_reader import QUICK, ScriptedEngine, good, page, png

TEXT_BLOCKS = (
    Block(BlockLabel.TEXT, "native line", (0.1, 0.1, 0.4, 0.12), None, (Line("native line"),)),
)


def _read(reader: VlmReader | PlainReader, rendered: RenderedPage | None = None) -> PageResult:
    async def go() -> PageResult:
        try:
            return await reader.read(rendered or page(), PageKey("doc", 3))
        finally:
            await reader.aclose()

    return asyncio.run(go())


def test_grounded_blocks_reach_the_page_with_the_figures_placeholders() -> None:
    reply = EngineReply(
        "<|ref|>text<|/ref|><|det|>[[10, 10, 900, 100]]<|/det|>\nHello\n\n"
        "<|ref|>image<|/ref|><|det|>[[100, 200, 600, 700]]<|/det|>\n"
    )
    reader = VlmReader(ScriptedEngine([reply]), DeepseekRecipe(), transport=QUICK, seed=1)  # type: ignore[arg-type]
    result = _read(reader)
    text, figure_block = result.blocks
    (figure,) = result.figures
    assert text.text == "Hello" and text.bbox == pytest.approx(
        (10 / GRID, 10 / GRID, 900 / GRID, 100 / GRID), abs=1e-4
    )
    assert figure_block.text == figure.placeholder and figure.placeholder in result.text
    assert figure_block.bbox == pytest.approx(figure.box, abs=1e-4)


def test_blocks_of_a_page_the_model_turned_are_put_back_on_the_page_as_sent() -> None:
    # The first read says the page lies on its side: the reader turns the image 270° and
    # reads again; the figure the second read finds is on the turned image.
    figure_link = "![chart](page_100_200_300_400.png)"
    engine = ScriptedEngine([good(turn=90), good(f"Results\n\n{figure_link}")])
    reader = VlmReader(engine, OlmocrRecipe(), transport=QUICK, seed=1)  # type: ignore[arg-type]
    result = _read(reader)
    assert result.attributes["rotation"] == 270
    (figure,) = result.figures
    figure_block = next(b for b in result.blocks if b.label is BlockLabel.FIGURE)
    assert figure_block.bbox == pytest.approx(unturn_box(figure.box, 270), abs=1e-4)
    assert figure_block.bbox != pytest.approx(figure.box, abs=1e-3)


def test_fallbacks_carry_the_blocks_of_what_they_fall_back_on() -> None:
    garbage = EngineReply(text="no front matter at all", finish_reason="stop")
    native = RenderedPage(3, image=png(), text="native line", text_ok=True, text_blocks=TEXT_BLOCKS)
    reader = VlmReader(ScriptedEngine([garbage]), OlmocrRecipe(), transport=QUICK, seed=1)  # type: ignore[arg-type]
    assert _read(reader, native).blocks == TEXT_BLOCKS
    cpu_blocks = (Block(BlockLabel.TEXT, "cpu text", (0.2, 0.2, 0.3, 0.3), 0.9),)
    cpu = ScriptedEngine([EngineReply(text="cpu text", blocks=cpu_blocks)])
    reader = VlmReader(
        ScriptedEngine([garbage]),  # type: ignore[arg-type]
        OlmocrRecipe(),
        transport=QUICK,
        fallback_engine=lambda: cpu,  # type: ignore[arg-type,return-value]
        seed=1,
    )
    result = _read(reader)
    assert (result.route, result.blocks) == (Route.FALLBACK, cpu_blocks)


def test_the_plain_reader_keeps_the_engines_blocks_and_image_size() -> None:
    blocks = (Block(BlockLabel.TEXT, "read", (0.1, 0.1, 0.2, 0.2), 0.97),)
    engine = ScriptedEngine([EngineReply(text="read", blocks=blocks)])
    result = _read(PlainReader(engine))  # type: ignore[arg-type]
    assert result.blocks == blocks and result.image_size == ImageSize(1000, 1288)


def test_a_text_layer_page_keeps_the_layers_blocks() -> None:
    rendered = RenderedPage(1, text="native line", text_ok=True, text_blocks=TEXT_BLOCKS)
    assert settled_page(rendered, Route.TEXT_LAYER).blocks == TEXT_BLOCKS


def test_the_clean_pass_cleans_block_texts_as_it_cleans_the_page() -> None:
    prompt = "Convert this document page to Markdown."
    blocks = (Block(BlockLabel.TEXT, prompt), Block(BlockLabel.TEXT, "Hello there"))
    dirty = PageResult(1, f"{prompt}\n\nHello there", Route.ENGINE, blocks=blocks)
    cleaned = clean_page(dirty, (prompt,))
    assert cleaned.text == "Hello there"
    assert cleaned.blocks == (Block(BlockLabel.TEXT, "Hello there"),)
    untouched = PageResult(1, "Hello there", Route.ENGINE, blocks=blocks[1:])
    assert clean_page(untouched, (prompt,)) is untouched
