"""LightOnOCR (``lightonai/LightOnOCR-2-1B``, LightOnOCR-1 and -3): the page image alone.

Written from the authors' client, repository lightonai/LightOnOCR at commit
36755d461be079737860a5f03ae0c803501269e9: ``lightonocr/client.py`` (the request),
``lightonocr/models.py`` (what differs between generations), ``lightonocr/grounding.py``
(the grounding format) and ``README.md`` (server flags, modes, licence).

- Request: one user message holding the image and nothing else (``plain``), or the image
  then the word ``grounding`` (LightOnOCR-3 only); ``chat_template_kwargs`` turns thinking
  off, as the client always does.
- Image: longest side 1540 px for LightOnOCR-1/-2 and LightOnOCR-3-1B (their Pixtral
  processor shrinks to that anyway), 2048 px for LightOnOCR-3-0.8B/-4B.
- Sampling: temperature 0.2 (the client's default), top_p 0.9 for generations 1 and 2,
  1.0 for 3 (``models.Profile``); retries warm up from there.
- Server: ``--limit-mm-per-prompt '{"image": 1}' --mm-processor-cache-gb 0
  --no-enable-prefix-caching``, plus the max model length (and, for the Qwen3.5-based
  LightOnOCR-3 0.8B/4B, thinking off by default) of the README's model table.
- Output: Markdown with HTML tables and LaTeX (plain, no boxes); in grounding mode one
  ``![label](x1,y1,x2,y2) text`` marker per layout block, boxes on a 0-1000 grid, a
  ``label+`` block continuing the previous one. Page headers, footers and page numbers
  go to attributes; images and charts become figures.
- Weights: Apache-2.0 (the model cards; the README's licence covers the client code).

The client's repair of escaped dollar signs (``postprocess/fix_escaped_dollars.py``) is
not reproduced: ocrflow keeps the model's LaTeX as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from ocrflow.errors import ConfigError, ParseError
from ocrflow.recipes.base import ChatRecipe, ParsedPage
from ocrflow.recipes.cards import RecipeCard
from ocrflow.recipes.common import MALFORMED, reject_loop, require_stop
from ocrflow.recipes.layout import FigureSet, grounded_block, is_area, markdown_blocks, scale_box
from ocrflow.recipes.markup import TABLES_HTML, check_table_format, convert_tables
from ocrflow.recipes.text import normalize_whitespace, strip_code_fence, strip_meta_tokens
from ocrflow.types import Block, BlockLabel, EngineReply, union_box

GROUNDING_PROMPT = "grounding"
MODES = ("plain", "grounding")
#: Grounding boxes are on a 0-1000 grid whatever the image size.
GRID = 1000
#: The grounding marker, as ``lightonocr/grounding.py`` matches it.
MARKER = re.compile(
    r"!\[([A-Za-z_][\w-]*?)(\+?)\]\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)[ \t]*"
)
BASE_FLAGS = (
    "--limit-mm-per-prompt",
    '{"image": 1}',
    "--mm-processor-cache-gb",
    "0",
    "--no-enable-prefix-caching",
)
_NO_THINKING = '{"enable_thinking": false}'
#: LightOnOCR's grounding labels in the document model's vocabulary.
BLOCK_LABELS = {
    "title": BlockLabel.TITLE,
    "section": BlockLabel.SECTION_HEADER,
    "text": BlockLabel.TEXT,
    "list": BlockLabel.LIST_ITEM,
    "caption": BlockLabel.CAPTION,
    "footnote": BlockLabel.FOOTNOTE,
    "aside_text": BlockLabel.TEXT,
    "header": BlockLabel.PAGE_HEADER,
    "footer": BlockLabel.PAGE_FOOTER,
    "page_number": BlockLabel.PAGE_FOOTER,
    "table": BlockLabel.TABLE,
    "chart": BlockLabel.FIGURE,
    "formula": BlockLabel.FORMULA,
    "code": BlockLabel.CODE,
    "image": BlockLabel.FIGURE,
}
_FURNITURE = {"header": "page_header", "footer": "page_footer", "page_number": "page_number"}
_FIGURES = ("image", "chart")

CARD = RecipeCard(
    models=(
        "lightonai/LightOnOCR-2-1B",
        "lightonai/LightOnOCR-1B-1025",
        "lightonai/LightOnOCR-3-1B",
        "lightonai/LightOnOCR-3-0.8B",
        "lightonai/LightOnOCR-3-4B",
    ),
    boxes=True,
    licence="Apache-2.0",
    notes="boxes in grounding mode only (LightOnOCR-3, mode=grounding)",
)


@dataclass(frozen=True, slots=True)
class LightonocrRecipe(ChatRecipe):
    """LightOnOCR: the image alone (plain) or with ``grounding``; Markdown or marked blocks."""

    model: str = ""
    name: str = "lightonocr"
    mode: str = "plain"
    target_dim: int = 1540
    temperatures: tuple[float, ...] = (0.2, 0.2, 0.3, 0.4, 0.6)
    top_p: float = 0.9
    #: ocrflow's budget: a dense page of Markdown stays well below it.
    max_tokens: int = 4096
    server_flags: tuple[str, ...] = BASE_FLAGS
    table_format: str = TABLES_HTML

    def __post_init__(self) -> None:
        check_table_format(self.table_format)
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")

    @property
    def prompt(self) -> str | None:
        """Nothing in plain mode (the image alone); the word ``grounding`` otherwise."""
        return GROUNDING_PROMPT if self.mode == "grounding" else None

    def extra_body(self, attempt: int) -> dict[str, Any]:
        """The client's nucleus sampling, and thinking off (ignored by older templates)."""
        return {"top_p": self.top_p, "chat_template_kwargs": {"enable_thinking": False}}

    def parse(self, reply: EngineReply) -> ParsedPage:
        """Plain: the Markdown tidied. Grounding: marked blocks into Markdown and blocks."""
        require_stop(reply)
        text = strip_code_fence(strip_meta_tokens(reply.text).strip())
        if self.mode == "grounding":
            return self._grounded(text)
        markdown = normalize_whitespace(convert_tables(text, self.table_format))
        reject_loop(markdown)
        return ParsedPage(markdown, 0, blocks=markdown_blocks(markdown))

    def _grounded(self, text: str) -> ParsedPage:
        """The page of a grounding reply: body blocks in order, furniture apart."""
        marked = split_grounded(text)
        if not marked and text.strip():
            raise ParseError("grounding reply holds no ![label](box) marker", reason=MALFORMED)
        figures = FigureSet()
        attributes: dict[str, Any] = {}
        parts: list[str] = []
        blocks: list[Block] = []
        # Whether the last block went into the body: ``label+`` continues it only then, as
        # the authors' ``to_markdown`` joins them.
        previous_kept = False
        for label, continues, box, body in marked:
            part = self._part(label, box, body, figures, attributes)
            mapped = BLOCK_LABELS.get(label, BlockLabel.TEXT)
            block = grounded_block(mapped, part or body, [box], label)
            if continues and previous_kept and part:
                parts[-1] = f"{parts[-1]} {part}"
                blocks[-1] = _joined(blocks[-1], block)
                continue
            if part:
                parts.append(part)
            if block is not None:
                blocks.append(block)
            previous_kept = bool(part) and block is not None
        markdown = normalize_whitespace("\n\n".join(parts))
        reject_loop(markdown)
        return ParsedPage(
            markdown, 0, attributes | figures.attributes(), tuple(figures.figures), tuple(blocks)
        )

    def _part(
        self,
        label: str,
        box: tuple[float, float, float, float],
        body: str,
        figures: FigureSet,
        attributes: dict[str, Any],
    ) -> str:
        """The Markdown one marked block adds to the page (furniture goes to attributes)."""
        if label in _FURNITURE:
            attributes.setdefault(_FURNITURE[label], []).append(" ".join(body.split()))
            return ""
        if label in _FIGURES:
            # An image's text is its description; a chart's is its data as a table.
            alt = body if label == "image" else ""
            placeholder = figures.add(box, label, alt) if is_area(box) else ""
            data = convert_tables(body, self.table_format) if label == "chart" else ""
            return "\n\n".join(part for part in (placeholder, data) if part)
        return convert_tables(body, self.table_format).strip()


def split_grounded(text: str) -> list[tuple[str, bool, tuple[float, float, float, float], str]]:
    """``(label, continues, box in 0..1, text)`` of each marker, as ``parse_blocks`` of the
    authors' ``grounding.py`` splits them (a marker owns the text up to the next one)."""
    marks = list(MARKER.finditer(text))
    found = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        numbers = [float(mark.group(n)) for n in range(3, 7)]
        box = scale_box(numbers, GRID, GRID)
        found.append((mark.group(1), mark.group(2) == "+", box, text[mark.end() : end].strip()))
    return found


def _joined(first: Block, second: Block | None) -> Block:
    """``first`` continued by ``second``: texts joined, boxes united."""
    if second is None:
        return first
    return replace(
        first, text=f"{first.text} {second.text}", bbox=union_box((first.bbox, second.bbox))
    )


def generation(model: str) -> int | None:
    """The LightOnOCR generation a model name says (``models.profile``), else None."""
    name = model.lower()
    if match := re.search(r"lightonocr-(\d+)-", name):
        return int(match.group(1))
    return 1 if "lightonocr-1b" in name else None


def lightonocr_recipe(model: str = "", **options: Any) -> LightonocrRecipe:
    """A ``LightonocrRecipe`` with the defaults of ``model``'s generation, then ``options``.

    A name that says no generation is taken for LightOnOCR-3 at 2048 px, as the client does.
    """
    gen = generation(model)
    defaults: dict[str, Any] = {}
    if gen not in (1, 2):
        pixtral = "lightonocr-3-1b" in model.lower()
        flags: tuple[str, ...] = (*BASE_FLAGS, "--max-model-len", "16384" if pixtral else "18000")
        if not pixtral:
            flags = (*flags, "--default-chat-template-kwargs", _NO_THINKING)
        defaults = {
            "target_dim": 1540 if pixtral else 2048,
            "top_p": 1.0,
            "max_tokens": 8192,
            "server_flags": flags,
        }
    if options.get("mode") == "grounding" and gen in (1, 2):
        raise ConfigError(f"{model} has no grounding mode: it needs a LightOnOCR-3 model")
    recipe = LightonocrRecipe(model=model)
    return replace(recipe, **(defaults | options))
