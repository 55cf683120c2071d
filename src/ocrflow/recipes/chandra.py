"""Chandra OCR (``datalab-to/chandra``): HTML layout blocks, turned into Markdown.

The reply is a sequence of top-level blocks::

    <div data-bbox="62 40 960 92" data-label="Section-Header"><h1>Annual Report</h1></div>
    <div data-bbox="62 110 960 400" data-label="Text"><p>...</p></div>

with boxes on a 0-1024 grid and labels Caption, Footnote, Equation-Block, List-Group,
Page-Header, Page-Footer, Image, Section-Header, Table, Text, Complex-Block, Code-Block,
Form, Table-Of-Contents and Figure. Page headers and footers become attributes; Image and
Figure blocks become figure crops. Every layout block is also a block of the page
(``ParsedPage.blocks``: label mapped, box in 0..1, Markdown). Prompt and sampling follow the
chandra repository.

Chandra 2 (``datalab-to/chandra-ocr-2``) answers in the same blocks with a 0-1000 grid and
four more labels: Chemical-Block (``<chem>`` SMILES: a formula), Diagram (Mermaid: a
figure, its text kept, not cropped, as chandra's ``output.py`` crops Image and Figure
only), Bibliography (text) and Blank-Page (dropped). ``chandra_recipe`` picks its prompt,
grid, retry temperatures and server flags by the model id; ``recipes/chandra2.py`` cites
the authors' files they come from.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ocrflow.recipes import chandra2
from ocrflow.recipes.base import ChatRecipe, ParsedPage
from ocrflow.recipes.common import reject_loop, require_stop
from ocrflow.recipes.layout import FigureSet, grounded_block, is_area, parse_box, scale_box
from ocrflow.recipes.markup import (
    TABLES_HTML,
    ConvertedHtml,
    HtmlBlock,
    check_table_format,
    html_to_markdown,
    split_blocks,
)
from ocrflow.recipes.text import (
    ensure_heading,
    normalize_whitespace,
    strip_code_fence,
    strip_meta_tokens,
)
from ocrflow.types import Block, BlockLabel, EngineReply

ALLOWED_TAGS = [
    *("math", "br", "i", "b", "u", "del", "sup", "sub", "table", "tr", "td", "p", "th", "div"),
    *("pre", "h1", "h2", "h3", "h4", "h5", "ul", "ol", "li", "input", "a", "span", "img", "hr"),
    *("tbody", "small", "caption", "strong", "thead", "big", "code"),
]
ALLOWED_ATTRIBUTES = [
    *("class", "colspan", "rowspan", "display", "checked", "type", "border", "value", "style"),
    *("href", "alt", "align"),
]
BBOX_SCALE = 1024

_GUIDELINES = f"""Only use these tags {ALLOWED_TAGS}, and these attributes {ALLOWED_ATTRIBUTES}.

Guidelines:
* Inline math: Surround math with <math>...</math> tags. Math expressions should be rendered \
in KaTeX-compatible LaTeX. Use display for block math.
* Tables: Use colspan and rowspan attributes to match table structure.
* Formatting: Maintain consistent formatting with the image, including spacing, indentation, \
subscripts/superscripts, and special characters.
* Images: Include a description of any images in the alt attribute of an <img> tag. Do not \
fill out the src property.
* Forms: Mark checkboxes and radio buttons properly.
* Text: join lines together properly into paragraphs using <p>...</p> tags.  Use <br> tags for \
line breaks within paragraphs, but only when absolutely necessary to maintain meaning.
* Use the simplest possible HTML structure that accurately represents the content of the block.
* Make sure the text is accurate and easy for a human to read and interpret.  Reading order \
should be correct and natural."""

#: Chandra's ``OCR_LAYOUT_PROMPT`` (word for word: the model was trained on it).
LAYOUT_PROMPT = f"""OCR this image to HTML, arranged as layout blocks.  Each layout block \
should be a div with the data-bbox attribute representing the bounding box of the block in \
[x0, y0, x1, y1] format.  Bboxes are normalized 0-{BBOX_SCALE}. The data-label attribute is \
the label for the block.

Use the following labels:
- Caption
- Footnote
- Equation-Block
- List-Group
- Page-Header
- Page-Footer
- Image
- Section-Header
- Table
- Text
- Complex-Block
- Code-Block
- Form
- Table-Of-Contents
- Figure

{_GUIDELINES}"""

_FURNITURE = {"Page-Header": "page_header", "Page-Footer": "page_footer"}
_FIGURES = ("Image", "Figure")
#: Chandra's labels in the document model's vocabulary (others: text, label kept).
_BLOCK_LABELS = {
    "Caption": BlockLabel.CAPTION,
    "Footnote": BlockLabel.FOOTNOTE,
    "Equation-Block": BlockLabel.FORMULA,
    "List-Group": BlockLabel.LIST_ITEM,
    "Page-Header": BlockLabel.PAGE_HEADER,
    "Page-Footer": BlockLabel.PAGE_FOOTER,
    "Image": BlockLabel.FIGURE,
    "Figure": BlockLabel.FIGURE,
    "Section-Header": BlockLabel.SECTION_HEADER,
    "Table": BlockLabel.TABLE,
    "Text": BlockLabel.TEXT,
    "Code-Block": BlockLabel.CODE,
    # Chandra 2's new labels.
    "Chemical-Block": BlockLabel.FORMULA,
    "Diagram": BlockLabel.FIGURE,
    "Bibliography": BlockLabel.TEXT,
}


@dataclass(frozen=True, slots=True)
class ChandraRecipe(ChatRecipe):
    """Chandra: image then layout prompt; greedy first, then 0.3 with top_p 0.95."""

    model: str = ""
    name: str = "chandra"
    prompt: str = LAYOUT_PROMPT
    #: Longest side; Chandra accepts up to about 6.3 megapixels.
    target_dim: int = 2048
    temperatures: tuple[float, ...] = (0.0, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3)
    #: ``top_p`` of the first attempt, then of every retry (as chandra's vLLM client).
    top_p: tuple[float, float] = (0.1, 0.95)
    max_tokens: int = 12384
    server_flags: tuple[str, ...] = (
        "--max-model-len",
        "32768",
        "--limit-mm-per-prompt",
        '{"image": 1, "video": 0}',
    )
    bbox_scale: int = BBOX_SCALE
    table_format: str = TABLES_HTML

    def __post_init__(self) -> None:
        check_table_format(self.table_format)

    def extra_body(self, attempt: int) -> dict[str, Any]:
        """``top_p`` of the first attempt, then of the retries."""
        return {"top_p": self.top_p[0] if attempt == 0 else self.top_p[1]}

    def parse(self, reply: EngineReply) -> ParsedPage:
        """Blocks in order into Markdown; furniture into attributes; images into figures."""
        require_stop(reply)
        html = strip_code_fence(strip_meta_tokens(reply.text).strip())
        figures = FigureSet()
        attributes: dict[str, Any] = {}
        parts, blocks = [], []
        for block in split_blocks(html):
            part, found = self._block(block, figures, attributes)
            parts.append(part)
            if found is not None:
                blocks.append(found)
        markdown = normalize_whitespace("\n\n".join(part for part in parts if part))
        reject_loop(markdown)
        return ParsedPage(
            markdown,
            0,
            attributes | figures.attributes(),
            tuple(figures.figures),
            tuple(blocks),
        )

    def _block(
        self, block: HtmlBlock, figures: FigureSet, attributes: dict[str, Any]
    ) -> tuple[str, Block | None]:
        """The Markdown of one layout block (furniture goes to ``attributes``) and the
        page block it is."""
        label = block.attrs.get("data-label", "")
        converted = html_to_markdown(block.inner_html, self.table_format)
        markdown = self._markdown(block, label, converted, figures)
        if label in _FURNITURE:
            attributes.setdefault(_FURNITURE[label], []).append(converted.markdown)
        boxes = self._boxes(block)
        mapped = _BLOCK_LABELS.get(label, BlockLabel.TEXT)
        text = converted.markdown if label in _FURNITURE else markdown
        return markdown, grounded_block(mapped, text, boxes, label)

    def _markdown(
        self, block: HtmlBlock, label: str, converted: ConvertedHtml, figures: FigureSet
    ) -> str:
        """The Markdown a block adds to the page."""
        if label in _FURNITURE:
            return ""
        if label in _FIGURES:
            alt = " ".join(alt for alt in converted.image_alts if alt)
            placeholder = self._figure(block, label.lower(), alt, figures)
            return "\n\n".join(part for part in (placeholder, converted.markdown) if part)
        if label == "Section-Header":
            return ensure_heading(converted.markdown, 2)
        if label == "Blank-Page":
            return ""
        return converted.markdown

    def _figure(self, block: HtmlBlock, label: str, alt: str, figures: FigureSet) -> str:
        """A figure for the block's box; nothing when the box is missing or empty."""
        boxes = self._boxes(block)
        if not boxes or not is_area(boxes[0]):
            return ""
        return figures.add(boxes[0], label, alt)

    def _boxes(self, block: HtmlBlock) -> list[tuple[float, float, float, float]]:
        """The block's box scaled to 0..1 (none when it is missing or unreadable)."""
        numbers = parse_box(block.attrs.get("data-bbox", ""))
        if len(numbers) != 4:
            return []
        return [scale_box(numbers, self.bbox_scale, self.bbox_scale)]


def chandra_recipe(model: str = "", **options: Any) -> ChandraRecipe:
    """A ``ChandraRecipe`` for ``model``: Chandra 2's settings when the id names it."""
    defaults = dict(chandra2.SETTINGS) if chandra2.is_chandra2(model) else {}
    return replace(ChandraRecipe(model=model), **(defaults | options))
