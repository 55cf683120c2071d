"""Reply formats of the one-step recipes added with ``ocrflow recipes``: LightOnOCR (plain
and grounding), PaddleOCR-VL and GLM-OCR.

Each reply keeps the fake server's contract (``replies.py``): the heading names the page's
image tag and the body ends with ``(temperature T)``; around them sits the markup each
model writes, so that the recipe's parser runs its real code path:

- ``lightonocr``: Markdown with an HTML table (LightOnOCR-2 plain mode);
- ``lightonocr-grounding``: ``![label](x1,y1,x2,y2) text`` blocks on a 0-1000 grid, a
  title, a text block, an image and a page number (LightOnOCR-3 grounding mode);
- ``paddleocr-vl``: text with ``\\(...\\)`` inline LaTeX, as the ``OCR:`` prompt answers;
- ``glm-ocr``: Markdown with a ``$$`` display formula and an HTML table.
"""

from __future__ import annotations

NEW_FORMATS = ("lightonocr", "lightonocr-grounding", "paddleocr-vl", "glm-ocr")

#: Boxes (0-1000) of the grounding reply's blocks: title, text, image, page number.
GROUNDING_BOXES = {
    "title": (100, 50, 900, 90),
    "text": (100, 120, 900, 600),
    "image": (150, 640, 850, 900),
    "page_number": (490, 950, 510, 965),
}
_TABLE = "<table><tr><th>item</th><th>value</th></tr><tr><td>total</td><td>42</td></tr></table>"


def new_format_text(fmt: str, heading: str, body: str, tail: str) -> str:
    """The reply of ``fmt`` (one of ``NEW_FORMATS``) around the page's heading and body."""
    if fmt == "lightonocr":
        return f"{heading}\n\n{body}{tail}\n\n{_TABLE}"
    if fmt == "lightonocr-grounding":
        box = {label: ",".join(str(v) for v in b) for label, b in GROUNDING_BOXES.items()}
        return (
            f"![title]({box['title']}) {heading}\n"
            f"![text]({box['text']}) {body}{tail}\n"
            f"![image]({box['image']}) A bar chart of quarterly values.\n"
            f"![page_number]({box['page_number']}) 1\n"
        )
    if fmt == "paddleocr-vl":
        return f"{heading}\n\n{body}{tail}\n\nThe energy is \\(E=mc^{{2}}\\) here."
    if fmt == "glm-ocr":
        return f"{heading}\n\n{body}{tail}\n\n$$\nE=mc^{{2}}\n$$\n\n{_TABLE}"
    raise ValueError(f"not a new reply format: {fmt!r}")
