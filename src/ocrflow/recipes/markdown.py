"""Generic Markdown VLMs (Qwen2.5-VL, Qwen3-VL, Nanonets-OCR2, LightOnOCR-2, ...).

The model sees the image, then an instruction (or no instruction at all for LightOnOCR),
and answers with Markdown: HTML tables and LaTeX are kept as written; a reply wrapped in
a ```markdown fence is unwrapped. ``markdown_recipe(model)`` picks the prompt, image size
and sampling of a known family from ``FAMILIES``; every value can be overridden.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from ocrflow.recipes.base import ChatRecipe, ParsedPage
from ocrflow.recipes.common import reject_loop, require_stop
from ocrflow.recipes.layout import markdown_blocks
from ocrflow.recipes.markup import TABLES_HTML, check_table_format, convert_tables
from ocrflow.recipes.text import normalize_whitespace, strip_code_fence, strip_meta_tokens
from ocrflow.types import EngineReply

GENERIC_PROMPT = (
    "Convert this document page to Markdown. Keep the natural reading order and every word "
    "as written; use # headings for titles, HTML for tables and LaTeX for equations. "
    "Return only the Markdown."
)
#: The prompt of the Nanonets-OCR2 model card.
NANONETS_PROMPT = (
    "Extract the text from the above document as if you were reading it naturally. "
    "Return the tables in html format. Return the equations in LaTeX representation. "
    "If there is an image in the document and image caption is not present, add a small "
    "description of the image inside the <img></img> tag; otherwise, add the image caption "
    "inside <img></img>. Watermarks should be wrapped in brackets. "
    "Ex: <watermark>OFFICIAL COPY</watermark>. Page numbers should be wrapped in brackets. "
    "Ex: <page_number>14</page_number> or <page_number>9/22</page_number>. "
    "Prefer using ☐ and ☑ for check boxes."
)

# Nanonets-OCR2 tags page furniture; these move to attributes.
_FURNITURE_TAGS = re.compile(r"<(page_number|watermark)>(.*?)</\1>", re.S | re.I)


@dataclass(frozen=True, slots=True)
class MarkdownRecipe(ChatRecipe):
    """A VLM that answers with Markdown; ``prompt=None`` sends the image alone."""

    model: str = ""
    name: str = "markdown"
    prompt: str | None = GENERIC_PROMPT
    target_dim: int = 1288
    temperatures: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7)
    max_tokens: int = 8192
    server_flags: tuple[str, ...] = ("--limit-mm-per-prompt", '{"image": 1, "video": 0}')
    #: Nucleus sampling for the request body; None leaves the server's default.
    top_p: float | None = None
    table_format: str = TABLES_HTML

    def __post_init__(self) -> None:
        check_table_format(self.table_format)

    def extra_body(self, attempt: int) -> dict[str, Any]:
        """``top_p`` when set, else nothing (the server's default)."""
        return {} if self.top_p is None else {"top_p": self.top_p}

    def parse(self, reply: EngineReply) -> ParsedPage:
        """The reply's Markdown, unwrapped and tidied; page numbers and watermarks apart."""
        require_stop(reply)
        text = strip_code_fence(strip_meta_tokens(reply.text).strip())
        text, attributes = _take_furniture(text)
        markdown = normalize_whitespace(convert_tables(text, self.table_format))
        reject_loop(markdown)
        return ParsedPage(markdown, 0, attributes, blocks=markdown_blocks(markdown))


def _take_furniture(text: str) -> tuple[str, dict[str, Any]]:
    """``<page_number>`` and ``<watermark>`` contents as attributes, out of the text."""
    attributes: dict[str, Any] = {}

    def take(match: re.Match[str]) -> str:
        attributes.setdefault(match.group(1).lower(), []).append(match.group(2).strip())
        return ""

    return _FURNITURE_TAGS.sub(take, text), attributes


#: Known families: a lower-case substring of the model name and its recipe defaults.
FAMILIES: tuple[tuple[str, Mapping[str, Any]], ...] = (
    (
        "lightonocr",
        MappingProxyType(
            {
                "prompt": None,
                "target_dim": 1540,
                "temperatures": (0.2, 0.2, 0.3, 0.4, 0.6),
                "max_tokens": 4096,
                "top_p": 0.9,
                "server_flags": ("--limit-mm-per-prompt", '{"image": 1}', "--async-scheduling"),
            }
        ),
    ),
    (
        "nanonets-ocr",
        MappingProxyType({"prompt": NANONETS_PROMPT, "target_dim": 1540, "max_tokens": 15000}),
    ),
    ("qwen3-vl", MappingProxyType({"target_dim": 1280})),
    ("qwen2.5-vl", MappingProxyType({"target_dim": 1288})),
)


def family_defaults(model: str) -> dict[str, Any]:
    """The defaults of the first family whose pattern is in ``model`` (else none)."""
    lowered = model.lower()
    return next((dict(defaults) for pattern, defaults in FAMILIES if pattern in lowered), {})


def markdown_recipe(model: str = "", **options: Any) -> MarkdownRecipe:
    """A ``MarkdownRecipe`` with the family defaults of ``model``, then ``options``."""
    return replace(MarkdownRecipe(model=model), **(family_defaults(model) | options))
