"""Open PDFs with PDFium and render their pages. Call only from worker processes."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image

from ocrflow.errors import RenderError
from ocrflow.types import Reason

# PDFium's FPDF_GetLastError codes (fpdfview.h).
_ERR_FILE = 2
_ERR_FORMAT = 3
_ERR_PASSWORD = 4
_ERR_SECURITY = 5


def open_pdf(path: str, passwords: Sequence[str] = ()) -> tuple[pdfium.PdfDocument, int | None]:
    """Open ``path``, trying no password first, then each of ``passwords``.

    Returns the document and the index of the password that opened it (``None`` if none was
    needed). Raises ``RenderError`` with reason ``encrypted``, ``corrupt`` or ``empty``.
    """
    for index, password in enumerate((None, *passwords)):
        _mark_last_error()
        try:
            pdf = pdfium.PdfDocument(path, password=_saslprep(password))
        except pdfium.PdfiumError as exc:
            code = getattr(exc, "err_code", None)
            if code == _ERR_FILE and os.access(path, os.R_OK):
                code = 0  # our own mark: PDFium failed without saying why
            if code == _ERR_PASSWORD and _has_encrypt_dict(path):
                continue
            raise _open_error(code, exc) from exc
        return pdf, (index - 1 if index else None)
    hint = "no password given" if not passwords else f"none of {len(passwords)} passwords fit"
    raise RenderError(f"document is encrypted ({hint}); pass --password", reason=Reason.ENCRYPTED)


def _mark_last_error() -> None:
    """Set PDFium's last-error code to "file access" by asking it to open no file.

    The code is per thread and only some failure paths write it: a zero-page document fails
    without a word, so a worker would report whatever the previous bad file left behind
    (one corpus run called an empty PDF "corrupt" because a broken one came before it).
    """
    pdfium_c.FPDF_LoadDocument(b"\0", None)


def _has_encrypt_dict(path: str) -> bool:
    """Whether the file names an /Encrypt dictionary at all.

    PDFium's last-error code is per thread and is not reset by every failure path, so a
    worker that just met an encrypted file can report "password" for the next, unrelated one.
    """
    tail = b""
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            if b"/Encrypt" in tail + block:
                return True
            tail = block[-16:]
    return False


def _open_error(code: int | None, exc: Exception) -> RenderError:
    if code == _ERR_PASSWORD:
        return RenderError(
            "PDFium could not load the document (no pages or no page tree)", reason=Reason.EMPTY
        )
    if code == _ERR_SECURITY:
        return RenderError(f"unsupported security handler: {exc}", reason=Reason.ENCRYPTED)
    if code == 0:
        # PDFium reports "Success" when the page tree is empty or unusable.
        return RenderError("document has no pages", reason=Reason.EMPTY)
    return RenderError(f"not a readable PDF: {exc}", reason=Reason.CORRUPT)


def _saslprep(password: str | None) -> str | None:
    """AES-256 (R6) passwords are SASLprep-normalised; NFKC without soft hyphens is close."""
    if password is None:
        return None
    return unicodedata.normalize("NFKC", password.replace("\u00ad", ""))


def page_count(pdf: pdfium.PdfDocument) -> int:
    """Number of pages; a zero-page document is ``empty``."""
    count = len(pdf)
    if count <= 0:
        raise RenderError("document has no pages", reason=Reason.EMPTY)
    return count


def render_pdf_page(
    page: pdfium.PdfPage,
    *,
    target_dim: int | None = None,
    scale: float | None = None,
    max_page_points: float,
    max_pixels: int,
    rotation: int = 0,
) -> Image.Image:
    """Render ``page`` at ``scale`` pixels a point, or so its longest side is ``target_dim``
    pixels.

    Page sizes are checked before any bitmap is allocated: a page claiming absurd dimensions
    fails as ``too_large`` instead of asking PDFium for gigabytes.
    """
    width, height = page.get_size()
    if not (0 < width <= max_page_points and 0 < height <= max_page_points):
        raise RenderError(f"page size {width:.0f}x{height:.0f} pt is not sane", reason="too_large")
    if scale is None:
        if target_dim is None:
            raise ValueError("render_pdf_page needs target_dim or scale")
        scale = target_dim / max(width, height)
    pixels = (width * scale) * (height * scale)
    if pixels > max_pixels or min(width, height) * scale < 1:
        raise RenderError(f"page would render to {pixels:.0f} px", reason="too_large")
    bitmap = page.render(scale=scale, rotation=rotation, may_draw_forms=True)
    try:
        return bitmap.to_pil().convert("RGB")
    finally:
        bitmap.close()
