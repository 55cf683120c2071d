"""MinerU2.5's layout step and how its blocks become a page (``recipes/mineru.py``).

Follows ``mineru_vl_utils/mineru_client.py`` (opendatalab/mineru-vl-utils at commit
abb57de7386e4313f270cb14c088f7611301fc30): ``_layout_re``, ``_convert_bbox``,
``parse_layout_output``, ``_filter_table_internal_layout_blocks``, the caption filter and
skip list of ``prepare_for_extract``; and ``post_process/json2markdown.py`` for the joins.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ocrflow.recipes.base import StepAnswer
from ocrflow.recipes.layout import FigureSet
from ocrflow.recipes.text import ensure_heading, normalize_whitespace
from ocrflow.types import Block, BlockLabel, unit_box

_LAYOUT = re.compile(
    r"<\|box_start\|>(\d+)\s+(\d+)\s+(\d+)\s+(\d+)"
    r"<\|box_end\|><\|ref_start\|>(\w+?)<\|ref_end\|>"
    r"(?:(<\|rotate_(?:up|right|down|left)\|>))?"
    r"(.*?)(?=<\|box_start\|>|$)",
    re.S,
)
ANGLES = {
    "<|rotate_up|>": 0,
    "<|rotate_right|>": 90,
    "<|rotate_down|>": 180,
    "<|rotate_left|>": 270,
}
BLOCK_TYPES = frozenset(
    [
        "text",
        "title",
        "doc_title",
        "paragraph_title",
        "table",
        "equation",
        "formula_number",
        "code",
        "algorithm",
        "aside_text",
        "ref_text",
        "index",
        "phonetic",
        "list_item",
        "caption",
        "table_caption",
        "image_caption",
        "code_caption",
        "footnote",
        "table_footnote",
        "image_footnote",
        "header",
        "footer",
        "page_number",
        "page_footnote",
        "image",
        "chart",
        "list",
        "image_block",
        "equation_block",
        "unknown",
    ]
)
#: Blocks the crop step does not read: containers, and images without image analysis.
NOT_READ = frozenset(("list", "equation_block", "image_block", "image", "chart"))
#: Page furniture (``PARATEXT_TYPES``): kept as blocks, left out of the Markdown.
PARATEXT = frozenset(("header", "footer", "page_number", "aside_text", "page_footnote"))
#: MinerU's types in the document model's vocabulary (others: text, type kept).
LABELS: Mapping[str, BlockLabel] = {
    "title": BlockLabel.TITLE,
    "doc_title": BlockLabel.TITLE,
    "paragraph_title": BlockLabel.SECTION_HEADER,
    "table": BlockLabel.TABLE,
    "equation": BlockLabel.FORMULA,
    "code": BlockLabel.CODE,
    "algorithm": BlockLabel.CODE,
    "list_item": BlockLabel.LIST_ITEM,
    "caption": BlockLabel.CAPTION,
    "table_caption": BlockLabel.CAPTION,
    "image_caption": BlockLabel.CAPTION,
    "code_caption": BlockLabel.CAPTION,
    "footnote": BlockLabel.FOOTNOTE,
    "table_footnote": BlockLabel.FOOTNOTE,
    "image_footnote": BlockLabel.FOOTNOTE,
    "page_footnote": BlockLabel.FOOTNOTE,
    "header": BlockLabel.PAGE_HEADER,
    "footer": BlockLabel.PAGE_FOOTER,
    "image": BlockLabel.FIGURE,
    "chart": BlockLabel.FIGURE,
}
INSIDE = 0.9


@dataclass(frozen=True, slots=True)
class LayoutBlock:
    """One block of the layout reply: type, box (0..1 of the page), angle, continuation."""

    type: str
    bbox: tuple[float, float, float, float]
    angle: int | None = None
    merge_prev: bool = False

    def to_json(self) -> list[Any]:
        """A compact, JSON-ready form (kept in the page's attributes and checkpoints)."""
        return [self.type, list(self.bbox), self.angle, self.merge_prev]

    @classmethod
    def from_json(cls, row: Sequence[Any]) -> LayoutBlock:
        """The inverse of ``to_json``."""
        kind, box, angle, merge = row
        return cls(str(kind), tuple(float(v) for v in box), angle, bool(merge))  # type: ignore[arg-type]


def parse_layout(text: str) -> list[LayoutBlock]:
    """The layout reply's blocks, as ``parse_layout_output`` keeps them."""
    blocks = []
    for match in _LAYOUT.finditer(text):
        x1, y1, x2, y2, kind, rotate, tail = match.groups()
        box = _convert_box((int(x1), int(y1), int(x2), int(y2)))
        kind = kind.lower()
        kind = "image" if kind == "unknown" else kind
        if box is None or kind == "inline_formula" or kind not in BLOCK_TYPES:
            continue
        angle = ANGLES.get(rotate) if rotate else None
        merge = kind == "text" and "txt_contd_tgt" in tail
        blocks.append(LayoutBlock(kind, box, angle, merge))
    inside = _covered(blocks, {"text", "equation", "equation_block"}, {"table"})
    return [block for i, block in enumerate(blocks) if i not in inside]


def filter_captions(blocks: list[LayoutBlock]) -> list[LayoutBlock]:
    """Without image captions that lie inside an image (``prepare_for_extract``)."""
    inside = _covered(blocks, {"image_caption"}, {"image", "chart", "image_block"})
    return [block for i, block in enumerate(blocks) if i not in inside]


def to_read(blocks: Sequence[LayoutBlock]) -> list[int]:
    """Indices of the blocks the crop step reads."""
    return [i for i, block in enumerate(blocks) if block.type not in NOT_READ]


def block_label(block: LayoutBlock) -> BlockLabel:
    """The block's label; a page number is a header or a footer by where it sits."""
    if block.type == "page_number":
        return BlockLabel.PAGE_FOOTER if block.bbox[1] > 0.5 else BlockLabel.PAGE_HEADER
    return LABELS.get(block.type, BlockLabel.TEXT)


def assemble(
    layout: Sequence[LayoutBlock], answers: Mapping[str, StepAnswer], figures: FigureSet
) -> tuple[str, tuple[Block, ...], dict[str, Any]]:
    """The page's Markdown, blocks and attributes from its layout and its crops' answers.

    A block whose crop request failed keeps its box and label with no text, confidence 0
    and ``source_label`` ``"<type>:failed"``; it is listed in ``failed_blocks``.
    """
    parts: list[str] = []
    blocks: list[Block] = []
    attributes: dict[str, Any] = {}
    failed: list[dict[str, Any]] = []
    last_text = -1
    for index, block in enumerate(layout):
        label = block_label(block)
        box = unit_box(block.bbox, 1.0, 1.0)
        source = block.type if block.type != label else None
        if block.type in ("image", "chart"):
            placeholder = figures.add(block.bbox, "image")
            parts.append(placeholder)
            blocks.append(Block(label, placeholder, box, source_label=source))
            continue
        answer = answers.get(f"b{index}")
        if answer is None:
            continue  # a container, or a crop too small to read
        if answer.text is None:
            failed.append({"block": index, "type": block.type, "reason": answer.reason})
            blocks.append(Block(label, "", box, 0.0, source_label=f"{block.type}:failed"))
            continue
        text = _markdown(block.type, answer.text)
        blocks.append(Block(label, text, box, source_label=source))
        if block.type in PARATEXT:
            key = "page_footer" if label is BlockLabel.PAGE_FOOTER else "page_header"
            attributes.setdefault(key, []).append(text)
        elif block.merge_prev and last_text >= 0 and text:
            parts[last_text] += ("" if _cjk(text) else " ") + text
        elif text:
            parts.append(text)
            last_text = len(parts) - 1 if block.type == "text" else last_text
    if failed:
        attributes["failed_blocks"] = failed
    return normalize_whitespace("\n\n".join(parts)), tuple(blocks), attributes


def _markdown(kind: str, text: str) -> str:
    if kind in ("title", "doc_title"):
        return ensure_heading(text, 1)
    if kind == "paragraph_title":
        return ensure_heading(text, 2)
    if kind == "equation":
        body = text.strip().removeprefix("$$").removesuffix("$$")
        body = body.strip().removeprefix("\\[").removesuffix("\\]").strip()
        return f"$$\n{body}\n$$" if body else ""
    return text


def _cjk(text: str) -> bool:
    return re.search(r"[\u4e00-\u9fff\u3400-\u4dbf]", text) is not None


def _convert_box(box: tuple[int, int, int, int]) -> tuple[float, float, float, float] | None:
    """``_convert_bbox``: a 0-1000 box as fractions, ordered; None when out of range or empty."""
    if any(v < 0 or v > 1000 for v in box):
        return None
    x1, x2 = sorted((box[0], box[2]))
    y1, y2 = sorted((box[1], box[3]))
    if x1 == x2 or y1 == y2:
        return None
    return (x1 / 1000, y1 / 1000, x2 / 1000, y2 / 1000)


def _covered(blocks: Sequence[LayoutBlock], kinds: set[str], containers: set[str]) -> set[int]:
    """Indices of ``kinds`` blocks with ``INSIDE`` of their area inside a container."""
    boxes = [i for i, block in enumerate(blocks) if block.type in containers]
    covered = set()
    for i, block in enumerate(blocks):
        if block.type in kinds and any(
            j != i and _cover(block.bbox, blocks[j].bbox) >= INSIDE for j in boxes
        ):
            covered.add(i)
    return covered


def _cover(inner: Sequence[float], outer: Sequence[float]) -> float:
    area = max(0.0, inner[2] - inner[0]) * max(0.0, inner[3] - inner[1])
    if area == 0:
        return 0.0
    w = min(inner[2], outer[2]) - max(inner[0], outer[0])
    h = min(inner[3], outer[3]) - max(inner[1], outer[1])
    return (w * h) / area if w > 0 and h > 0 else 0.0
