"""Hand-written PDFs whose words sit at known places, for geometry tests.

Every word is its own text object in Courier, a standard font every PDF reader has and
whose glyphs are all 0.6 em wide, so a word's box is known exactly from its origin, its
size and its length: nothing is measured with the code under test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ocrflow.types import BBox

#: Courier's advance (all glyphs) and its ascender/descender, in em (its AFM file).
ADVANCE = 0.6
ASCENT = 0.629
DESCENT = 0.157


@dataclass(frozen=True)
class Word:
    """A word drawn with its baseline starting at ``(x, y)`` (PDF points, origin bottom
    left of the page's media box) in Courier of ``size`` points."""

    text: str
    x: float
    y: float
    size: float = 12.0

    def pdf_box(self) -> tuple[float, float, float, float]:
        """``(left, bottom, right, top)`` in PDF points."""
        width = ADVANCE * self.size * len(self.text)
        return (
            self.x,
            self.y - DESCENT * self.size,
            self.x + width,
            self.y + ASCENT * self.size,
        )


@dataclass(frozen=True)
class Page:
    """A page of ``width`` x ``height`` points shown turned by ``rotate`` degrees clockwise."""

    words: Sequence[Word]
    width: float = 612.0
    height: float = 792.0
    rotate: int = 0

    def word_box(self, word: Word) -> tuple[float, float, float, float]:
        """``word``'s box as fractions 0..1 of the page as shown (rotation applied), origin
        at the top left."""
        left, bottom, right, top = word.pdf_box()
        u0, u1 = left / self.width, right / self.width
        v0, v1 = 1 - top / self.height, 1 - bottom / self.height
        turn = self.rotate % 360
        if turn == 0:
            return (u0, v0, u1, v1)
        if turn == 90:  # (u, v) -> (1 - v, u)
            return (1 - v1, u0, 1 - v0, u1)
        if turn == 180:  # (u, v) -> (1 - u, 1 - v)
            return (1 - u1, 1 - v1, 1 - u0, 1 - v0)
        return (v0, 1 - u1, v1, 1 - u0)  # 270: (u, v) -> (v, 1 - u)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _content(page: Page) -> bytes:
    ops = [
        f"BT /F1 {w.size:g} Tf 1 0 0 1 {w.x:g} {w.y:g} Tm ({_escape(w.text)}) Tj ET"
        for w in page.words
    ]
    return "\n".join(ops).encode("latin-1")


def make_pdf(pages: Sequence[Page]) -> bytes:
    """A PDF file of ``pages`` (one Courier font resource shared by every page)."""
    objects: list[bytes] = []
    kids = []
    font_ref = 3
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(b"")  # the page tree, filled in once the pages are numbered
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>")
    for page in pages:
        content = _content(page)
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
        content_ref = len(objects)
        objects.append(
            (
                f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {page.width:g} {page.height:g}] "
                f"/Rotate {page.rotate} /Resources << /Font << /F1 {font_ref} 0 R >> >> "
                f"/Contents {content_ref} 0 R >>"
            ).encode()
        )
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>".encode()
    return pdf_from_objects(objects)


def pdf_from_objects(objects: list[bytes]) -> bytes:
    """A PDF file of ``objects`` (numbered from 1, object 1 the catalog) with its xref table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def paragraph_words(
    lines: Sequence[str], *, x: float = 72.0, top: float = 700.0, size: float = 12.0
) -> list[Word]:
    """The words of ``lines`` set left-aligned from ``top`` down, 1.4 lines apart, one
    space (0.6 em) between words."""
    words = []
    for row, line in enumerate(lines):
        cursor = x
        for token in line.split():
            words.append(Word(token, cursor, top - row * 1.4 * size, size))
            cursor += ADVANCE * size * (len(token) + 1)
    return words


def inside(inner: BBox, outer: BBox | None, slack: float) -> bool:
    """Whether box ``inner`` lies in box ``outer`` give or take ``slack`` on every side."""
    if outer is None:
        return False
    return (
        inner[0] >= outer[0] - slack
        and inner[1] >= outer[1] - slack
        and inner[2] <= outer[2] + slack
        and inner[3] <= outer[3] + slack
    )
