"""The chat-completions body each recipe's request becomes, byte for byte."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import pytest

from ocrflow.engines.completions import request_body
from ocrflow.recipes import chandra, chandra2, dots, glm_ocr, markdown, mineru, olmocr
from ocrflow.recipes.base import ChatRecipe, ParsedPage
from ocrflow.recipes.registry import RECIPES, recipe_for_model
from ocrflow.types import EngineReply, PageImage

IMAGE = PageImage(data=b"\x89PNG\r\n\x1a\nsmall page", width=12, height=16)
IMAGE_PART = {
    "type": "image_url",
    "image_url": {"url": "data:image/png;base64," + base64.b64encode(IMAGE.data).decode()},
}
NGRAM = {"ngram_size": 30, "window_size": 90, "whitelist_token_ids": [128821, 128822]}
DEEPSEEK_EXTRA = {"skip_special_tokens": False, "vllm_xargs": NGRAM}


def text(prompt: str) -> dict[str, str]:
    """The text part of a user message."""
    return {"type": "text", "text": prompt}


@dataclass(frozen=True)
class Case:
    """One recipe, its options and attempt, and the body it must produce."""

    model: str
    recipe: str
    options: dict[str, Any]
    attempt: int
    content: list[dict[str, Any]]
    temperature: float
    max_tokens: int
    extra: dict[str, Any]


CASES = [
    Case("m", "olmocr", {}, 0, [text(olmocr.PROMPT), IMAGE_PART], 0.1, 8000, {}),
    Case(
        "m",
        "olmocr",
        {"guided": True},
        3,
        [text(olmocr.PROMPT), IMAGE_PART],
        0.3,
        8000,
        {"structured_outputs": {"regex": olmocr.GUIDED_REGEX}},
    ),
    Case(
        "m",
        "deepseek",
        {},
        0,
        [IMAGE_PART, text("<|grounding|>Convert the document to markdown.")],
        0.0,
        7000,
        DEEPSEEK_EXTRA,
    ),
    Case(
        "m",
        "deepseek",
        {"mode": "free"},
        9,
        [IMAGE_PART, text("Free OCR.")],
        0.5,
        7000,
        DEEPSEEK_EXTRA,
    ),
    Case(
        "deepseek-ai/DeepSeek-OCR-2",
        "deepseek",
        {},
        0,
        [IMAGE_PART, text("<|grounding|>Convert the document to markdown.")],
        0.0,
        8192,
        {
            "skip_special_tokens": False,
            "vllm_xargs": NGRAM | {"ngram_size": 20, "window_size": 50},
        },
    ),
    Case(
        "rednote-hilab/dots.mocr",
        "dots",
        {},
        0,
        [IMAGE_PART, text(dots.IMAGE_TOKENS + dots.LAYOUT_PROMPT)],
        0.1,
        16384,
        {"top_p": 0.9},
    ),
    Case(
        "datalab-to/chandra-ocr-2",
        "chandra",
        {},
        2,
        [IMAGE_PART, text(chandra2.LAYOUT_PROMPT)],
        0.4,
        12384,
        {"top_p": 0.95},
    ),
    Case(
        "m",
        "dots",
        {},
        1,
        [IMAGE_PART, text(dots.IMAGE_TOKENS + dots.LAYOUT_PROMPT)],
        0.2,
        16384,
        {"top_p": 0.9},
    ),
    Case(
        "m",
        "chandra",
        {},
        0,
        [IMAGE_PART, text(chandra.LAYOUT_PROMPT)],
        0.0,
        12384,
        {"top_p": 0.1},
    ),
    Case(
        "m",
        "chandra",
        {},
        2,
        [IMAGE_PART, text(chandra.LAYOUT_PROMPT)],
        0.3,
        12384,
        {"top_p": 0.95},
    ),
    Case("m", "markdown", {}, 0, [IMAGE_PART, text(markdown.GENERIC_PROMPT)], 0.0, 8192, {}),
    Case("lightonai/LightOnOCR-2-1B", "markdown", {}, 1, [IMAGE_PART], 0.2, 4096, {"top_p": 0.9}),
    Case(
        "nanonets/Nanonets-OCR2-3B",
        "markdown",
        {},
        7,
        [IMAGE_PART, text(markdown.NANONETS_PROMPT)],
        0.7,
        15000,
        {},
    ),
    Case(
        "lightonai/LightOnOCR-2-1B",
        "lightonocr",
        {},
        0,
        [IMAGE_PART],
        0.2,
        4096,
        {"top_p": 0.9, "chat_template_kwargs": {"enable_thinking": False}},
    ),
    Case(
        "lightonai/LightOnOCR-3-1B",
        "lightonocr",
        {"mode": "grounding"},
        2,
        [IMAGE_PART, text("grounding")],
        0.3,
        8192,
        {"top_p": 1.0, "chat_template_kwargs": {"enable_thinking": False}},
    ),
    Case(
        "m",
        "paddleocr-vl",
        {"task": "table"},
        0,
        [IMAGE_PART, text("Table Recognition:")],
        0.0,
        8192,
        {"top_p": 1.0, "repetition_penalty": 1.0},
    ),
    Case(
        "m",
        "glm-ocr",
        {},
        0,
        [IMAGE_PART, text("Text Recognition:")],
        0.0,
        8192,
        dict(glm_ocr.GREEDY),
    ),
    Case(
        "m",
        "glm-ocr",
        {},
        1,
        [IMAGE_PART, text("Text Recognition:")],
        0.2,
        8192,
        dict(glm_ocr.RETRY),
    ),
    Case(
        "m",
        "mineru",
        {},
        0,
        [IMAGE_PART, text("\nLayout Detection:")],
        0.0,
        4096,
        mineru._sampling(0.0, 0.0),
    ),
    Case(
        "m",
        "granite-docling",
        {},
        0,
        [IMAGE_PART, text("Convert this page to docling.")],
        0.0,
        8192,
        {"stop": ["</doctag>", "<|end_of_text|>"], "skip_special_tokens": False},
    ),
]


def expected_body(case: Case) -> bytes:
    """The JSON the engine must send for ``case``, in the engine's key order and spacing."""
    body = {
        "model": case.model,
        "messages": [{"role": "user", "content": case.content}],
        "temperature": case.temperature,
        "max_tokens": case.max_tokens,
        **case.extra,
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def test_every_recipe_has_a_pinned_body() -> None:
    assert {case.recipe for case in CASES} == set(RECIPES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.recipe}-{c.options}-{c.attempt}")
def test_request_body_is_pinned(case: Case) -> None:
    recipe = recipe_for_model(case.model, case.recipe, **case.options)
    request = recipe.build_request(IMAGE, case.attempt, page_key="doc:3")
    assert request_body(request, case.model) == expected_body(case)
    assert request.page_key == "doc:3"


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_max_tokens_overrides_the_budget(name: str) -> None:
    request = recipe_for_model("m", name).build_request(IMAGE, 0, max_tokens=1000)
    assert json.loads(request_body(request, "m"))["max_tokens"] == 1000


@dataclass(frozen=True, slots=True)
class TinyRecipe(ChatRecipe):
    """A new recipe states its data and its parser; the skeleton builds its requests."""

    name: str = "tiny"
    prompt: str | None = "Read this."
    target_dim: int = 512
    temperatures: tuple[float, ...] = (0.0, 0.4)
    max_tokens: int = 100
    server_flags: tuple[str, ...] = ()

    def parse(self, reply: EngineReply) -> ParsedPage:
        """The reply as it is."""
        return ParsedPage(reply.text)


def test_a_new_recipe_gets_the_skeleton_defaults() -> None:
    request = TinyRecipe().build_request(IMAGE, 5, page_key="k")
    expected = Case("t", "tiny", {}, 5, [IMAGE_PART, text("Read this.")], 0.4, 100, {})
    assert request_body(request, "t") == expected_body(expected)
    with pytest.raises(ValueError, match="attempt"):
        TinyRecipe().build_request(IMAGE, -1)
