"""Block boxes over a page image: one outline a block, coloured by its label, and the lines
read with a low confidence marked (dashed red, hatched), with a legend and toggles.

Boxes are fractions 0..1 of the page (``types.BBox``), so each is an absolutely positioned
``div`` with percentage ``left/top/width/height`` in a wrapper the image's size: they stay
on their text at any zoom or window width. The review image is the page turned as the engine
read it (``Page.rotation``), while boxes are measured before that turn: they are turned too.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from ocrflow.document import Page
from ocrflow.types import BBox, BlockLabel, Line, unturn_box

#: A line read below this confidence (0..1) is marked on the page image.
LOW_CONFIDENCE = 0.8
#: One colour a block label (the service's ``static/style.css`` uses the same ones).
LABEL_COLOURS: dict[str, str] = {
    BlockLabel.TEXT: "#1f77b4",
    BlockLabel.TITLE: "#9467bd",
    BlockLabel.SECTION_HEADER: "#8c564b",
    BlockLabel.LIST_ITEM: "#17becf",
    BlockLabel.TABLE: "#2ca02c",
    BlockLabel.FIGURE: "#ff7f0e",
    BlockLabel.CAPTION: "#bcbd22",
    BlockLabel.FORMULA: "#e377c2",
    BlockLabel.FOOTNOTE: "#7f7f7f",
    BlockLabel.PAGE_HEADER: "#393b79",
    BlockLabel.PAGE_FOOTER: "#637939",
    BlockLabel.CODE: "#000000",
}
#: A label the palette does not know (a newer run's) still gets an outline.
OTHER_COLOUR = "#555555"
LOW_COLOUR = "#e00000"

BOX_STYLE = (
    "".join(
        f'[data-label="{label}"] {{ --c: {colour}; }}\n' for label, colour in LABEL_COLOURS.items()
    )
    + f"""
.page-figure {{ position: relative; border: 1px solid #d0d7de; background: #fff; }}
.page-figure img {{ display: block; width: 100%; height: auto; border: 0; }}
.boxes {{ position: absolute; inset: 0; pointer-events: none; }}
.box, .low-line {{ position: absolute; pointer-events: auto; }}
.box {{ border: 2px solid var(--c, {OTHER_COLOUR}); background: transparent; }}
.box:hover {{ background: rgba(127, 127, 127, .15); }}
.low-line {{ outline: 2px dashed {LOW_COLOUR}; background: repeating-linear-gradient(45deg,
  rgba(224, 0, 0, .28) 0 3px, transparent 3px 7px); }}
.hide-boxes .box, .hide-low .low-line {{ display: none; }}
.box-tools {{ display: flex; flex-wrap: wrap; gap: 4px 12px; align-items: center; margin: 6px 0; }}
.legend {{ display: inline-flex; flex-wrap: wrap; gap: 4px 10px; font-size: 12px; }}
.legend .swatch {{ display: inline-block; width: 12px; height: 12px; margin-right: 3px;
  border: 2px solid var(--c, {OTHER_COLOUR}); vertical-align: -2px; }}
.legend .swatch.low {{ border: 2px dashed {LOW_COLOUR}; }}
.confidence {{ font-weight: 600; }} .confidence.low {{ color: var(--failed); }}
"""
)

BOX_SCRIPT = """
(function () {
  function bind(id, cls) {
    var box = document.getElementById(id);
    if (!box) { return; }
    function apply() { document.body.classList.toggle(cls, !box.checked); }
    box.addEventListener('change', apply);
    apply();
  }
  bind('show-boxes', 'hide-boxes');
  bind('show-low', 'hide-low');
})();
"""


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def turn_box(box: BBox, degrees: int) -> BBox:
    """Where ``box`` lies once its page is turned ``degrees`` clockwise (a multiple of 90):
    the inverse of ``unturn_box``."""
    return unturn_box(box, (360 - degrees % 360) % 360)


def box_style(box: BBox) -> str:
    """The ``style`` placing a box over its image: percentages of the image's size."""
    x0, y0, x1, y1 = box
    return (
        f"left:{x0 * 100:.3f}%;top:{y0 * 100:.3f}%;"
        f"width:{(x1 - x0) * 100:.3f}%;height:{(y1 - y0) * 100:.3f}%"
    )


def low_lines(page: Page, threshold: float = LOW_CONFIDENCE) -> list[Line]:
    """The page's lines read with a confidence below ``threshold`` (with or without a box)."""
    return [
        line
        for block in page.blocks
        for line in block.lines
        if line.confidence is not None and line.confidence < threshold
    ]


def confidence_text(value: float | None) -> str:
    """A confidence for people: ``0.93``, or ``none`` when the engine gave none."""
    return "none" if value is None else f"{value:.2f}"


def overlay_html(page: Page, turn: int = 0) -> str:
    """The boxes of ``page`` over an image of it turned ``turn`` degrees clockwise: a block
    outline each (``data-label``, ``data-block``: its index in the page's blocks) and the
    low-confidence lines. Empty when no block has a box."""
    parts = []
    for index, block in enumerate(page.blocks):
        if block.bbox is None:
            continue
        tip = str(block.label) + (f" ({block.source_label})" if block.source_label else "")
        if block.confidence is not None:
            tip += f" · confidence {confidence_text(block.confidence)}"
        parts.append(
            f'<div class="box" data-label="{_esc(block.label)}" data-block="{index}" '
            f'style="{box_style(turn_box(block.bbox, turn))}" title="{_esc(tip)}"></div>'
        )
    for line in low_lines(page):
        if line.bbox is None:
            continue
        tip = f"low confidence {confidence_text(line.confidence)}: {line.text}"
        parts.append(
            f'<div class="low-line" data-confidence="{line.confidence}" '
            f'style="{box_style(turn_box(line.bbox, turn))}" title="{_esc(tip)}"></div>'
        )
    return f'<div class="boxes">{"".join(parts)}</div>' if parts else ""


def legend_labels(pages: Iterable[Page]) -> list[str]:
    """The labels of the boxed blocks of ``pages``, in the palette's order (others last)."""
    seen = {str(b.label) for page in pages for b in page.blocks if b.bbox is not None}
    known = [label for label in LABEL_COLOURS if label in seen]
    return known + sorted(seen - set(known))


def box_tools(labels: Iterable[str], low: bool) -> str:
    """The toggles and the legend above a document's pages (empty without boxes)."""
    swatches = "".join(
        f'<span class="legend-item"><span class="swatch" data-label="{_esc(label)}"></span>'
        f"{_esc(label)}</span>"
        for label in labels
    )
    if not swatches and not low:
        return ""
    toggles = '<label><input type="checkbox" id="show-boxes" checked> block boxes</label>'
    if low:
        toggles += (
            '<label><input type="checkbox" id="show-low" checked> low-confidence lines</label>'
        )
        swatches += (
            '<span class="legend-item"><span class="swatch low"></span>'
            f"line confidence &lt; {LOW_CONFIDENCE}</span>"
        )
    return (
        f'<div class="box-tools">{toggles}<span class="legend" id="legend">{swatches}</span></div>'
    )
