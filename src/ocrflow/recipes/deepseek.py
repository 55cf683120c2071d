"""DeepSeek-OCR (``deepseek-ai/DeepSeek-OCR``): grounded Markdown with boxes on a 0-999 grid.

In ``grounding`` mode the reply is a sequence of regions::

    <|ref|>title<|/ref|><|det|>[[62, 41, 937, 88]]<|/det|>
    # Quarterly Report

    <|ref|>image<|/ref|><|det|>[[90, 300, 520, 610]]<|/det|>

each followed by its text. Labels seen: ``title``, ``sub_title``, ``text``, ``table``
(HTML), ``image``, ``image_caption``, ``table_caption``, ``table_footnote``, ``equation``
(LaTeX), and page furniture such as ``header``/``footer``. ``image`` regions become figure
crops; boxes on the 0-999 grid become fractions of the page. Every region is also a block
of the page (``ParsedPage.blocks``): its label mapped to the document model's, its box, its
Markdown. ``free`` mode answers with plain Markdown. Serving settings follow vLLM's
DeepSeek-OCR recipe.

DeepSeek-OCR 2 (``deepseek-ai/DeepSeek-OCR-2``) keeps the reply format (the same
``<|ref|>``/``<|det|>`` regions on the 0-999 grid), the prompts and the server flags; its
settings, selected by the model id (``deepseek_recipe``), follow the authors' vLLM runner,
repository deepseek-ai/DeepSeek-OCR-2 at commit 2f3699ebbb96fa8af32212e8c170f2cc28730fad:

- ``DeepSeek-OCR2-master/DeepSeek-OCR2-vllm/run_dpsk_ocr2_pdf.py``: the n-gram
  processor with ``ngram_size=20, window_size=50`` and the same ``<td>``/``</td>``
  whitelist (DeepSeek-OCR: 30/90), temperature 0, ``max_tokens=8192`` with
  ``max_model_len=8192`` (vLLM clamps the budget to the room the prompt leaves), special
  tokens kept; PDF pages rendered at 144 dpi.
- ``DeepSeek-OCR2-vllm/config.py``: ``PROMPT = '<image>\\n<|grounding|>Convert the document
  to markdown.'`` (``Free OCR.`` without layout), as DeepSeek-OCR; ``BASE_SIZE=1024``,
  ``IMAGE_SIZE=768``, ``CROP_MODE=True``, 2-6 crops: one 1024 px global view plus up to six
  768 px tiles (README "Support-Modes": dynamic resolution is the only mode). vLLM's own
  DeepSeek-OCR-2 processor tiles the same way, so the page is sent as the runner renders
  it: 1584 px, 144 dpi on a Letter page, rather than DeepSeek-OCR's untiled 640 px.
- Server (vLLM recipes ``DeepSeek/DeepSeek-OCR-2.md``): the same logits processor,
  ``--no-enable-prefix-caching --mm-processor-cache-gb 0``.
- Weights: Apache-2.0 (``LICENSE.txt`` of that repository; the card's licence field),
  where DeepSeek-OCR's are MIT.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from ocrflow.errors import ParseError
from ocrflow.recipes.base import ChatRecipe, ParsedPage
from ocrflow.recipes.common import MALFORMED, reject_loop, require_stop
from ocrflow.recipes.layout import FigureSet, grounded_block, is_area, parse_box, scale_box
from ocrflow.recipes.markup import (
    TABLES_HTML,
    check_table_format,
    clean_empty_cells,
    convert_tables,
)
from ocrflow.recipes.text import ensure_heading, normalize_whitespace, strip_meta_tokens
from ocrflow.types import Block, BlockLabel, EngineReply

#: Prompt of each mode (the chat template puts the image token before it).
PROMPTS = MappingProxyType(
    {
        "grounding": "<|grounding|>Convert the document to markdown.",
        "free": "Free OCR.",
    }
)
#: Image sizes of DeepSeek-OCR's native modes: 640 is one view with no crop tiles.
MODE_SIZES = MappingProxyType({"tiny": 512, "small": 640, "base": 1024, "large": 1280})

TEMPERATURES = (0.0, 0.1, 0.2, 0.3, 0.5)
SERVER_FLAGS = (
    "--logits_processors",
    "vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor",
    "--no-enable-prefix-caching",
    "--mm-processor-cache-gb",
    "0",
    "--max-model-len",
    "8192",
)
#: Arguments of the n-gram logits processor; 128821/128822 are ``<td>``/``</td>``.
NGRAM_ARGS = MappingProxyType(
    {"ngram_size": 30, "window_size": 90, "whitelist_token_ids": (128821, 128822)}
)
#: What DeepSeek-OCR 2's vLLM runner changes (``run_dpsk_ocr2_pdf.py``): a shorter n-gram
#: window, the whole context as budget, the page at 144 dpi for its 768 px tiling.
OCR2_SETTINGS = MappingProxyType(
    {"ngram_size": 20, "window_size": 50, "max_tokens": 8192, "target_dim": 1584}
)
_OCR2 = re.compile(r"deepseek[-_.]?ocr[-_.]?2(?!\d)", re.IGNORECASE)

GRID = 999
_REGION = re.compile(r"<\|ref\|>(.*?)<\|/ref\|>\s*<\|det\|>(.*?)<\|/det\|>", re.S)
_BOX = re.compile(r"\[\s*-?\d+(?:\.\d+)?(?:\s*,\s*-?\d+(?:\.\d+)?){3}\s*\]")
_CENTER = re.compile(r"</?center>", re.I)
_TABLE = re.compile(r"<table\b.*?</table\s*>", re.S | re.I)
_FURNITURE = {
    "header": "page_header",
    "page_header": "page_header",
    "footer": "page_footer",
    "page_footer": "page_footer",
    "page_number": "page_number",
}
#: DeepSeek-OCR's labels in the document model's vocabulary (others: text, label kept).
_BLOCK_LABELS = {
    "title": BlockLabel.TITLE,
    "sub_title": BlockLabel.SECTION_HEADER,
    "table": BlockLabel.TABLE,
    "image": BlockLabel.FIGURE,
    "image_caption": BlockLabel.CAPTION,
    "table_caption": BlockLabel.CAPTION,
    "caption": BlockLabel.CAPTION,
    "table_footnote": BlockLabel.FOOTNOTE,
    "footnote": BlockLabel.FOOTNOTE,
    "equation": BlockLabel.FORMULA,
    "formula": BlockLabel.FORMULA,
    "code": BlockLabel.CODE,
    "list": BlockLabel.LIST_ITEM,
    "header": BlockLabel.PAGE_HEADER,
    "page_header": BlockLabel.PAGE_HEADER,
    "footer": BlockLabel.PAGE_FOOTER,
    "page_footer": BlockLabel.PAGE_FOOTER,
}


@dataclass(frozen=True, slots=True)
class DeepseekRecipe(ChatRecipe):
    """DeepSeek-OCR: image first, ``grounding`` or ``free`` prompt, 640 px (no tiling)."""

    model: str = ""
    name: str = "deepseek"
    mode: str = "grounding"
    target_dim: int = MODE_SIZES["small"]
    temperatures: tuple[float, ...] = TEMPERATURES
    #: The 8192-token context less room for the prompt and the image (up to ~900 tokens
    #: when vLLM tiles an image larger than 640 px).
    max_tokens: int = 7000
    server_flags: tuple[str, ...] = SERVER_FLAGS
    table_format: str = TABLES_HTML
    #: The n-gram processor's ``ngram_size`` and ``window_size`` (``vllm_xargs``).
    ngram_size: int = 30
    window_size: int = 90

    def __post_init__(self) -> None:
        if self.mode not in PROMPTS:
            raise ValueError(f"DeepSeek-OCR mode must be one of {sorted(PROMPTS)}: {self.mode!r}")
        check_table_format(self.table_format)

    @property
    def prompt(self) -> str:
        """The prompt of this mode (the clean pass strips a reply that repeats it)."""
        return PROMPTS[self.mode]

    def extra_body(self, attempt: int) -> dict[str, Any]:
        """Special tokens kept so the grounding tags survive; the n-gram processor's args."""
        xargs = _ngram_args() | {"ngram_size": self.ngram_size, "window_size": self.window_size}
        return {"skip_special_tokens": False, "vllm_xargs": xargs}

    def parse(self, reply: EngineReply) -> ParsedPage:
        """Regions into Markdown in the order given; ``image`` regions into figures."""
        require_stop(reply)
        figures = FigureSet()
        attributes: dict[str, Any] = {}
        parts, blocks = [], []
        for label, box, text in split_regions(reply.text):
            part = self._region(label, box, text, figures, attributes)
            parts.append(part)
            block = region_block(label, box, part or _CENTER.sub("", text))
            if block is not None:
                blocks.append(block)
        markdown = normalize_whitespace("\n\n".join(part for part in parts if part))
        reject_loop(markdown)
        return ParsedPage(
            markdown,
            0,
            attributes | figures.attributes(),
            tuple(figures.figures),
            tuple(blocks),
        )

    def _region(
        self, label: str, box: str, text: str, figures: FigureSet, attributes: dict[str, Any]
    ) -> str:
        """The Markdown of one region (page furniture goes to ``attributes``)."""
        text = _CENTER.sub("", text).strip()
        if label in _FURNITURE:
            attributes.setdefault(_FURNITURE[label], []).append(text)
            return ""
        if label == "image":
            return "\n\n".join(_figures(box, figures) + ([text] if text else []))
        if label == "title":
            return ensure_heading(text, 1)
        if label == "sub_title":
            return ensure_heading(text, 2)
        if label == "table" or "<table" in text.lower():
            return convert_tables(_clean_tables(text), self.table_format)
        return text


def is_ocr2(model: str) -> bool:
    """Whether ``model`` names DeepSeek-OCR 2 (``deepseek-ai/DeepSeek-OCR-2``)."""
    return bool(_OCR2.search(model))


def deepseek_recipe(model: str = "", **options: Any) -> DeepseekRecipe:
    """A ``DeepseekRecipe`` with the settings of ``model``'s generation, then ``options``."""
    recipe = DeepseekRecipe(model=model)
    defaults = dict(OCR2_SETTINGS) if is_ocr2(model) else {}
    return replace(recipe, **(defaults | options))


def _ngram_args() -> dict[str, Any]:
    """A fresh copy of the n-gram processor arguments for one request."""
    return {key: list(v) if isinstance(v, tuple) else v for key, v in NGRAM_ARGS.items()}


def split_regions(text: str) -> list[tuple[str, str, str]]:
    """``(label, box text, region text)`` for each grounded region, meta tokens stripped.

    Text before the first region (all of a ``free`` reply) is one ``text`` region.
    """
    regions: list[tuple[str, str, str]] = []
    matches = list(_REGION.finditer(text))
    head = text[: matches[0].start()] if matches else text
    if head.strip():
        regions.append(("text", "", strip_meta_tokens(head)))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = strip_meta_tokens(text[match.end() : end])
        regions.append((match.group(1).strip().lower(), match.group(2), body))
    return regions


def region_block(label: str, box_text: str, markdown: str) -> Block | None:
    """The block of one region: its label mapped (a page number is page furniture at the
    top or the bottom), the union of its boxes, its Markdown."""
    boxes = []
    for box in _BOX.findall(box_text):
        try:
            boxes.append(scale_box(parse_box(box), GRID, GRID))
        except ValueError:
            continue  # an unreadable box: the block has no box, not no text
    mapped = _BLOCK_LABELS.get(label, BlockLabel.TEXT)
    if "<table" in markdown.lower() and mapped is BlockLabel.TEXT:
        mapped = BlockLabel.TABLE
    if label == "page_number":
        low = bool(boxes) and boxes[0][1] > 0.5
        mapped = BlockLabel.PAGE_FOOTER if low else BlockLabel.PAGE_HEADER
    return grounded_block(mapped, normalize_whitespace(markdown), boxes, label)


def _figures(box_text: str, figures: FigureSet) -> list[str]:
    """A figure per box of an ``image`` region; ``ParseError`` on unreadable boxes."""
    boxes = _BOX.findall(box_text)
    if not boxes:
        raise ParseError(f"image region without a box: {box_text!r}", reason=MALFORMED)
    scaled = [scale_box(parse_box(box), GRID, GRID) for box in boxes]
    return [figures.add(box, "image") for box in scaled if is_area(box)]


def _clean_tables(text: str) -> str:
    """Every HTML table in ``text`` without empty placeholder rows and columns."""
    return _TABLE.sub(lambda match: clean_empty_cells(match.group(0)), text)
