"""dots.ocr (``rednote-hilab/dots.ocr``): a JSON layout, turned into Markdown in reading order.

The reply is a JSON list of cells in reading order::

    [{"bbox": [x1, y1, x2, y2], "category": "Title", "text": "# Annual Report"}, ...]

with categories Caption, Footnote, Formula (LaTeX), List-item, Page-footer, Page-header,
Picture (no text), Section-header, Table (HTML), Text and Title (Markdown). Boxes are in
pixels of the image as the model saw it: the image sent, resized by the Qwen2-VL
``smart_resize`` (factor 28). Placing pictures therefore needs the size of the image
sent: the pipeline records it as ``image_width``/``image_height`` in
``EngineReply.attributes`` before calling ``parse``. Page headers and footers become
attributes, not body text. Every cell is also a block of the page (``ParsedPage.blocks``,
its box in 0..1 when the image size is known). Prompt and sampling follow the dots.ocr
repository.

dots.mocr (``rednote-hilab/dots.mocr``, formerly dots.ocr-1.5) is read by the same recipe:
repository rednote-hilab/dots.ocr at commit 36d7248878f181c6257dc1cbd799ae940970444f (now
dots.mocr's) keeps ``prompt_layout_all_en`` word for word (``dots_ocr/utils/prompts.py``),
the image-token prefix, temperature 0.1 and top_p 0.9 (``dots_ocr/model/inference.py``),
the 16384-token budget (``dots_ocr/parser.py``) and the pixel limits
(``dots_ocr/utils/consts.py``). What differs is the server: its README ("vLLM
inference") and ``demo/launch_model_vllm.sh`` start dots.mocr with
``--chat-template-content-format string``, where the dots.ocr README (commit
c3084bd43758c8597ae1883104ac1b2d39109532, vLLM >= 0.11) serves dots.ocr without it.
``dots_recipe`` adds the flag when the model id names dots.mocr. (``dots.mocr-svg`` is an
image-to-SVG model with its own prompt, not a layout reader.)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from ocrflow.errors import ParseError
from ocrflow.recipes.base import ChatRecipe, ParsedPage
from ocrflow.recipes.common import MALFORMED, reject_loop, require_stop
from ocrflow.recipes.layout import (
    FigureSet,
    grounded_block,
    is_area,
    reply_image_size,
    require_image_size,
    scale_box,
    smart_resize,
)
from ocrflow.recipes.markup import TABLES_HTML, check_table_format, convert_tables
from ocrflow.recipes.text import (
    ensure_heading,
    normalize_whitespace,
    strip_code_fence,
    strip_meta_tokens,
)
from ocrflow.types import Block, BlockLabel, EngineReply

#: dots.ocr's ``prompt_layout_all_en``, word for word (the model was trained on it).
LAYOUT_PROMPT = """Please output the layout information from the PDF image, including each \
layout element's bbox, its category, and the corresponding text content within the bbox.

1. Bbox format: [x1, y1, x2, y2]

2. Layout Categories: The possible categories are ['Caption', 'Footnote', 'Formula', \
'List-item', 'Page-footer', 'Page-header', 'Picture', 'Section-header', 'Table', 'Text', \
'Title'].

3. Text Extraction & Formatting Rules:
    - Picture: For the 'Picture' category, the text field should be omitted.
    - Formula: Format its text as LaTeX.
    - Table: Format its text as HTML.
    - All Others (Text, Title, etc.): Format their text as Markdown.

4. Constraints:
    - The output text must be the original text from the image, with no translation.
    - All layout elements must be sorted according to human reading order.

5. Final Output: The entire output must be a single JSON object.
"""
#: The image placeholder the dots.ocr client puts before the prompt: with it, vLLM does
#: not insert its own placeholder plus a newline, so the prompt matches training.
IMAGE_TOKENS = "<|img|><|imgpad|><|endofimg|>"

SERVER_FLAGS = ("--trust-remote-code", "--max-model-len", "32768")
#: dots.mocr's chat template reads the user turn as one string: vLLM must flatten the
#: content parts (README, ``vllm serve rednote-hilab/dots.mocr ...``).
MOCR_FLAGS = (*SERVER_FLAGS, "--chat-template-content-format", "string")
_MOCR = re.compile(r"dots[-_.]?mocr", re.IGNORECASE)

#: dots.ocr image processor limits (``min_pixels``/``max_pixels``).
MIN_PIXELS = 3136
MAX_PIXELS = 11289600

_FURNITURE = {"Page-header": "page_header", "Page-footer": "page_footer"}
#: dots.ocr's categories in the document model's vocabulary.
_BLOCK_LABELS = {
    "Caption": BlockLabel.CAPTION,
    "Footnote": BlockLabel.FOOTNOTE,
    "Formula": BlockLabel.FORMULA,
    "List-item": BlockLabel.LIST_ITEM,
    "Page-footer": BlockLabel.PAGE_FOOTER,
    "Page-header": BlockLabel.PAGE_HEADER,
    "Picture": BlockLabel.FIGURE,
    "Section-header": BlockLabel.SECTION_HEADER,
    "Table": BlockLabel.TABLE,
    "Text": BlockLabel.TEXT,
    "Title": BlockLabel.TITLE,
}
_SPACES = re.compile(r"\s+")
_DISPLAY_MATH = re.compile(r"\A(?:\$\$(.*)\$\$|\\\[(.*)\\\])\Z", re.S)


@dataclass(frozen=True, slots=True)
class DotsRecipe(ChatRecipe):
    """dots.ocr: image then layout prompt; JSON cells into Markdown, pictures into figures."""

    model: str = ""
    name: str = "dots"
    prompt: str = IMAGE_TOKENS + LAYOUT_PROMPT
    #: About 200 dpi on Letter/A4 pages, as the dots.ocr tools render.
    target_dim: int = 2048
    temperatures: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5, 0.7)
    top_p: float = 0.9
    max_tokens: int = 16384
    server_flags: tuple[str, ...] = SERVER_FLAGS
    table_format: str = TABLES_HTML

    def __post_init__(self) -> None:
        check_table_format(self.table_format)

    def extra_body(self, attempt: int) -> dict[str, Any]:
        """The nucleus sampling of dots.ocr's client."""
        return {"top_p": self.top_p}

    def parse(self, reply: EngineReply) -> ParsedPage:
        """Cells in order into Markdown; furniture into attributes; pictures into figures."""
        require_stop(reply)
        figures = FigureSet()
        attributes: dict[str, Any] = {}
        cells = load_cells(reply.text)
        parts = [(cell["category"], self._cell(cell, reply, figures, attributes)) for cell in cells]
        markdown = normalize_whitespace(_join([part for part in parts if part[1]]))
        reject_loop(markdown)
        grid = _grid(reply)
        blocks = (cell_block(c, part, grid) for c, (_, part) in zip(cells, parts, strict=True))
        return ParsedPage(
            markdown,
            0,
            attributes | figures.attributes(),
            tuple(figures.figures),
            tuple(block for block in blocks if block is not None),
        )

    def _cell(
        self, cell: dict[str, Any], reply: EngineReply, figures: FigureSet, attrs: dict[str, Any]
    ) -> str:
        """The Markdown of one cell (furniture goes to ``attrs``)."""
        category, text = cell["category"], str(cell.get("text") or "").strip()
        if category in _FURNITURE:
            attrs.setdefault(_FURNITURE[category], []).append(_SPACES.sub(" ", text))
            return ""
        if category == "Picture":
            return _picture(cell, reply, figures)
        if category == "Formula":
            return display_math(text)
        if category == "Table":
            return convert_tables(text, self.table_format)
        if category == "List-item":
            return text
        if category in ("Title", "Section-header"):
            return ensure_heading(text, 1 if category == "Title" else 2)
        return _SPACES.sub(" ", text)


def dots_recipe(model: str = "", **options: Any) -> DotsRecipe:
    """A ``DotsRecipe`` for ``model``: dots.mocr's server flags when the id names it."""
    defaults = {"server_flags": MOCR_FLAGS} if _MOCR.search(model) else {}
    return replace(DotsRecipe(model=model), **(defaults | options))


def _join(parts: list[tuple[str, str]]) -> str:
    """Cells as paragraphs; consecutive list items stay one list."""
    pieces: list[str] = []
    for i, (category, markdown) in enumerate(parts):
        if i:
            same_list = category == "List-item" == parts[i - 1][0]
            pieces.append("\n" if same_list else "\n\n")
        pieces.append(markdown)
    return "".join(pieces)


def _grid(reply: EngineReply) -> tuple[int, int] | None:
    """The pixel size the model's boxes are in (the resized image), if known."""
    size = reply_image_size(reply)
    return smart_resize(*size, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS) if size else None


def cell_block(cell: dict[str, Any], markdown: str, grid: tuple[int, int] | None) -> Block | None:
    """The block of one cell: its category mapped, its box in 0..1 (none without ``grid``
    or with a bad box), its Markdown (its raw text for page furniture)."""
    category = cell["category"]
    text = markdown or (str(cell.get("text") or "") if category in _FURNITURE else "")
    bbox = cell.get("bbox")
    numeric = isinstance(bbox, list) and len(bbox) == 4
    numeric = numeric and all(isinstance(v, int | float) for v in bbox or ())
    boxes = [scale_box([float(v) for v in bbox or ()], *grid)] if grid and numeric else []
    label = _BLOCK_LABELS.get(category, BlockLabel.TEXT)
    return grounded_block(label, normalize_whitespace(text), boxes, category)


def load_cells(text: str) -> list[dict[str, Any]]:
    """The reply's cells; ``ParseError`` unless it is a JSON list of cells with categories."""
    raw = strip_code_fence(strip_meta_tokens(text).strip())
    try:
        cells = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ParseError(f"reply is not JSON: {exc}", reason=MALFORMED) from exc
    if isinstance(cells, dict):
        cells = [cells]
    if not isinstance(cells, list) or not all(_is_cell(cell) for cell in cells):
        raise ParseError("reply is not a list of layout cells", reason=MALFORMED)
    return cells


def _is_cell(cell: object) -> bool:
    """Whether ``cell`` is a dict with a string category."""
    return isinstance(cell, dict) and isinstance(cell.get("category"), str)


def _picture(cell: dict[str, Any], reply: EngineReply, figures: FigureSet) -> str:
    """A figure for a Picture cell, its box scaled from the resized image's pixels."""
    bbox = cell.get("bbox")
    if not isinstance(bbox, list) or len(bbox) != 4:
        raise ParseError(f"Picture without a usable bbox: {bbox!r}", reason=MALFORMED)
    if not all(isinstance(v, int | float) for v in bbox):
        raise ParseError(f"Picture bbox is not numbers: {bbox!r}", reason=MALFORMED)
    width, height = smart_resize(
        *require_image_size(reply, "dots"), min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS
    )
    box = scale_box([float(v) for v in bbox], width, height)
    return figures.add(box, "picture", str(cell.get("text") or "")) if is_area(box) else ""


def display_math(latex: str) -> str:
    """A formula as a ``$$`` block (``\\[...\\]`` and ``$$...$$`` unwrapped first)."""
    match = _DISPLAY_MATH.match(latex.strip())
    inner = next((g for g in match.groups() if g is not None), "") if match else latex
    return f"$$\n{inner.strip()}\n$$" if inner.strip() else ""
