"""Page images for people: a document's pages as small JPEG files, rendered at review time
from the source with the project's renderer (``render.pdf`` / ``render.raster``).

``render_page_jpeg`` renders one page in the calling process (PDFium is not thread-safe:
call it from one thread per process). ``write_page_images`` renders a document's pages into
a folder and returns each page's file name or error as data, never raising, so it can run in
a worker process whose crash or hang costs only that document (see ``review.site``).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium
from PIL import Image

from ocrflow.config import RenderOptions
from ocrflow.errors import RenderError
from ocrflow.inputs.source import sniff_kind
from ocrflow.render.pdf import open_pdf, render_pdf_page
from ocrflow.render.raster import open_image, render_frame

#: Longest side of a review page image, in pixels: readable beside the text, small on disk.
REVIEW_DIM = 1000
JPEG_QUALITY = 70
#: The same guards as a run's defaults: a hostile page cannot ask for gigabytes of bitmap.
_GUARDS = RenderOptions()


@dataclass(frozen=True, slots=True)
class PageImageJob:
    """Which pages of which local file to render, and where to put the JPEGs."""

    path: str
    pages: tuple[int, ...]
    folder: str
    #: Extra clockwise rotation per page (what the engine found), as ``(page, degrees)``.
    rotations: tuple[tuple[int, int], ...] = ()
    target_dim: int = REVIEW_DIM


@dataclass(frozen=True, slots=True)
class PageImageFile:
    """One page's outcome: the JPEG's file name in the job's folder, or why there is none."""

    page: int
    name: str | None = None
    error: str | None = None


def page_image_name(page: int) -> str:
    """The file name of a page's review image."""
    return f"p{page:04d}.jpg"


def source_kind(path: str) -> str:
    """``pdf``, ``image``, ``empty`` or ``unknown``, from the file's first bytes."""
    with open(path, "rb") as handle:
        return sniff_kind(handle.read(2048))


def to_jpeg(image: Image.Image, quality: int = JPEG_QUALITY) -> bytes:
    """``image`` as JPEG bytes (RGB, optimised)."""
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="JPEG", quality=quality, optimize=True)
    return buffer.getvalue()


def render_page_jpeg(
    path: str, page: int, *, target_dim: int = REVIEW_DIM, rotation: int = 0
) -> bytes:
    """Page ``page`` (1-based) of the PDF or image at ``path`` as a JPEG whose longest side
    is ``target_dim``, turned ``rotation`` degrees clockwise. Raises ``RenderError``."""
    outcome = render_page_jpegs(path, [page], target_dim=target_dim, rotations={page: rotation})
    if isinstance(outcome[0], Exception):
        raise outcome[0]
    return outcome[0]


def render_page_jpegs(
    path: str,
    pages: Sequence[int],
    *,
    target_dim: int = REVIEW_DIM,
    rotations: dict[int, int] | None = None,
) -> list[bytes | RenderError]:
    """Several pages of one file, opening it once: each page's JPEG, or the ``RenderError``
    that page met (one bad page does not hide the others). Raises ``RenderError`` when the
    file itself cannot be opened."""
    turns = rotations or {}
    kind = source_kind(path)
    if kind == "pdf":
        return _pdf_jpegs(path, pages, target_dim, turns)
    if kind == "image":
        return _image_jpegs(path, pages, target_dim, turns)
    raise RenderError(f"not a PDF or an image ({kind})", reason="not_a_document")


def _pdf_jpegs(
    path: str, pages: Sequence[int], target_dim: int, turns: dict[int, int]
) -> list[bytes | RenderError]:
    pdf, _ = open_pdf(path)
    try:
        return [_guarded(_pdf_page_jpeg, pdf, n, target_dim, turns.get(n, 0)) for n in pages]
    finally:
        pdf.close()


def _pdf_page_jpeg(pdf: pdfium.PdfDocument, number: int, target_dim: int, rotation: int) -> bytes:
    if not 1 <= number <= len(pdf):
        raise RenderError(f"the document has no page {number}", reason="corrupt")
    page = pdf[number - 1]
    try:
        image = render_pdf_page(
            page,
            target_dim=target_dim,
            max_page_points=_GUARDS.max_page_points,
            max_pixels=_GUARDS.max_pixels,
            rotation=rotation,
        )
    finally:
        page.close()
    return to_jpeg(image)


def _image_jpegs(
    path: str, pages: Sequence[int], target_dim: int, turns: dict[int, int]
) -> list[bytes | RenderError]:
    with open_image(path, max_image_pixels=_GUARDS.max_image_pixels) as image:
        return [_guarded(_frame_jpeg, image, n, target_dim, turns.get(n, 0)) for n in pages]


def _frame_jpeg(image: Image.Image, number: int, target_dim: int, rotation: int) -> bytes:
    frame = render_frame(image, number, target_dim=target_dim)
    if rotation:
        frame = frame.rotate(-rotation, expand=True)
    return to_jpeg(frame)


def _guarded(render: Callable[..., bytes], *args: Any) -> bytes | RenderError:
    """One page's JPEG, or its error as a value."""
    try:
        return render(*args)
    except RenderError as exc:
        return exc
    except Exception as exc:  # PDFium and PIL raise many things on hostile input
        return RenderError(f"{type(exc).__name__}: {exc}", reason="render_error")


def write_page_images(job: PageImageJob) -> list[PageImageFile]:
    """Render the job's pages into ``job.folder``; errors become data, nothing raises."""
    if not os.path.isfile(job.path):
        return [PageImageFile(p, error="the source file no longer exists") for p in job.pages]
    try:
        outcomes = render_page_jpegs(
            job.path, job.pages, target_dim=job.target_dim, rotations=dict(job.rotations)
        )
    except Exception as exc:  # the file cannot be opened at all: every page says why
        return [PageImageFile(p, error=str(exc)) for p in job.pages]
    Path(job.folder).mkdir(parents=True, exist_ok=True)
    results = []
    for number, outcome in zip(job.pages, outcomes, strict=True):
        if isinstance(outcome, Exception):
            results.append(PageImageFile(number, error=str(outcome)))
            continue
        name = page_image_name(number)
        Path(job.folder, name).write_bytes(outcome)
        results.append(PageImageFile(number, name=name))
    return results
