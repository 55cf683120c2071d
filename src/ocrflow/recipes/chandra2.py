"""Chandra OCR 2 (``datalab-to/chandra-ocr-2``): what differs from Chandra 1.

Written from the authors' client as released with Chandra 2 (GitHub release "Chandra OCR
2" of datalab-to/chandra, 2026-03-18, tag commit 497dfd3; read from the same release on
PyPI, ``chandra-ocr`` 0.2.0, wheel sha256
11a9fffaa1afa8fb3be470205d4f8f0fd601c007f76e77aee76a7a290b8a8ed4; the mirrored repository
stops at Chandra 1):

- Prompt (``chandra/prompts.py``, ``OCR_LAYOUT_PROMPT``): boxes written ``x0 y0 x1 y1``
  on a 0-1000 grid (Chandra 1: ``[x0, y0, x1, y1]`` on 0-1024, ``settings.BBOX_SCALE``
  1000 now), four new labels (Chemical-Block, Diagram, Bibliography, Blank-Page), the
  ``<chem>`` tag, ``data-bbox``/``data-label`` among the attributes, and new guidelines
  (image descriptions, charts as data, diagrams as Mermaid, chemistry as SMILES, lists).
- Sampling (``chandra/model/vllm.py``): temperature 0 with top_p 0.1 first; a retry
  (up to ``MAX_VLLM_RETRIES`` 6) at ``min(0.2 * (retry + 1), 0.8)`` with top_p 0.95
  (Chandra 1: 0.3 on every retry). Budget ``MAX_OUTPUT_TOKENS`` 12384, as before.
- Image (``chandra/model/util.py``, ``scale_to_fit``): at most 3072 x 2048 pixels'
  worth, on a 28 px grid: the 2048 px long side of Chandra 1's recipe stays within it.
- Server (``chandra/scripts/vllm.py``): ``--max-model-len 18000`` and
  ``--mm-processor-kwargs '{"min_pixels": 3136, "max_pixels": 6291456}'`` (the others
  are hardware and deployment settings: batch sizes, memory share, served name).
- Output (``chandra/output.py``): the same top-level ``<div data-bbox data-label>``
  blocks; ``Blank-Page`` blocks are dropped; Image and Figure blocks are the ones cropped.
- Weights: the modified OpenRAIL-M licence of the card (``license: openrail``,
  ``license_link: LICENSE``, https://huggingface.co/datalab-to/chandra-ocr-2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

ALLOWED_TAGS = [
    *("math", "br", "i", "b", "u", "del", "sup", "sub", "table", "tr", "td", "p", "th", "div"),
    *("pre", "h1", "h2", "h3", "h4", "h5", "ul", "ol", "li", "input", "a", "span", "img", "hr"),
    *("tbody", "small", "caption", "strong", "thead", "big", "code", "chem"),
]
ALLOWED_ATTRIBUTES = [
    *("class", "colspan", "rowspan", "display", "checked", "type", "border", "value", "style"),
    *("href", "alt", "align", "data-bbox", "data-label"),
]
BBOX_SCALE = 1000

_GUIDELINES = f"""Only use these tags {ALLOWED_TAGS}, and these attributes {ALLOWED_ATTRIBUTES}.

Guidelines:
* Inline math: Surround math with <math>...</math> tags. Math expressions should be rendered \
in KaTeX-compatible LaTeX. Use display for block math.
* Tables: Use colspan and rowspan attributes to match table structure.
* Formatting: Maintain consistent formatting with the image, including spacing, indentation, \
subscripts/superscripts, and special characters.
* Images: Include a description of any images in the alt attribute of an <img> tag. Do not \
fill out the src property. Describe in detail inside the div tag. Also convert charts to high \
fidelity data, and convert diagrams to mermaid.
* Forms: Mark checkboxes and radio buttons properly.
* Text: join lines together properly into paragraphs using <p>...</p> tags.  Use <br> tags for \
line breaks within paragraphs, but only when absolutely necessary to maintain meaning.
* Chemistry: Use <chem>...</chem> tags for chemical formulas with reactive SMILES.
* Lists: Preserve indents and proper list markers.
* Use the simplest possible HTML structure that accurately represents the content of the block.
* Make sure the text is accurate and easy for a human to read and interpret.  Reading order \
should be correct and natural."""

#: Chandra 2's ``OCR_LAYOUT_PROMPT``, word for word (the model was trained on it).
LAYOUT_PROMPT = f"""OCR this image to HTML, arranged as layout blocks.  Each layout block \
should be a div with the data-bbox attribute representing the bounding box of the block in \
x0 y0 x1 y1 format.  Bboxes are normalized 0-{BBOX_SCALE}. The data-label attribute is the \
label for the block.

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
- Chemical-Block
- Diagram
- Bibliography
- Blank-Page

{_GUIDELINES}"""

#: The retry ladder of ``generate_vllm``: greedy, then 0.2 more per retry up to 0.8.
TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 0.8, 0.8)
SERVER_FLAGS = (
    "--max-model-len",
    "18000",
    "--mm-processor-kwargs",
    '{"min_pixels": 3136, "max_pixels": 6291456}',
)
#: What a ``ChandraRecipe`` for Chandra 2 sets over Chandra 1's defaults.
SETTINGS: Mapping[str, Any] = MappingProxyType(
    {
        "prompt": LAYOUT_PROMPT,
        "bbox_scale": BBOX_SCALE,
        "temperatures": TEMPERATURES,
        "server_flags": SERVER_FLAGS,
    }
)
_CHANDRA2 = re.compile(r"chandra[-_.]?(?:ocr[-_.]?)?2(?![\d.])", re.IGNORECASE)


def is_chandra2(model: str) -> bool:
    """Whether ``model`` names Chandra 2 (``datalab-to/chandra-ocr-2``)."""
    return bool(_CHANDRA2.search(model))
