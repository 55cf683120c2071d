"""Work for render worker processes. Every function here returns errors as data, never raises,
so one bad page never takes its neighbours down and results pickle cleanly."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field, replace

import pypdfium2 as pdfium
from PIL import Image, ImageChops

from ocrflow.errors import RenderError
from ocrflow.render.blank import is_blank_image
from ocrflow.render.pdf import open_pdf, page_count, render_pdf_page
from ocrflow.render.raster import frame_count, open_image, render_frame
from ocrflow.render.resolution import Resolution, fit_pixels
from ocrflow.render.textlayer import extract_text_layer, score_text_layer
from ocrflow.types import Block, PageImage, Reason

#: ``--text-layer redo`` OCRs a page again when this share of its text is invisible.
HIDDEN_LAYER_SHARE = 0.5
OUT_OF_MEMORY = "the page needs more memory than a render process may use (--render-memory)"


@dataclass(frozen=True, slots=True)
class RenderSpec:
    """How to turn a page into what the router and engine need."""

    target_dim: int = 1288
    #: Set: pages rendered at this resolution instead (scans at their own, at most
    #: ``max_scan_dpi``, when that is set too; ``resolution.py``).
    dpi: float | None = None
    max_scan_dpi: float | None = None
    max_pixels: int = 40_000_000
    max_page_points: float = 200_000.0
    max_image_pixels: int = 400_000_000
    text_layer: str = "auto"
    #: "raw" pixels for in-process engines, or "png"/"jpeg" for the wire.
    encoding: str = "raw"

    @property
    def resolution(self) -> Resolution:
        """The size pages get (``resolution.py``)."""
        return Resolution(self.target_dim, self.dpi, self.max_scan_dpi)


@dataclass(frozen=True, slots=True)
class ProbeJob:
    path: str
    kind: str
    passwords: tuple[str, ...] = ()
    max_image_pixels: int = 400_000_000


@dataclass(frozen=True, slots=True)
class DocumentProbe:
    """What opening a document told us; ``reason`` is set when it cannot be converted."""

    page_count: int = 0
    password_index: int | None = None
    reason: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PageJob:
    path: str
    kind: str
    pages: tuple[int, ...]
    spec: RenderSpec
    password: str | None = None
    #: Extra clockwise rotation, in degrees, for pages an engine found sideways.
    rotations: tuple[tuple[int, int], ...] = ()
    #: Render even when the text layer is good (used for re-OCR on request).
    force_image: bool = False


@dataclass(frozen=True, slots=True)
class RenderedPage:
    """One page out of a worker: a good text layer, a blank verdict, an image, or an error."""

    page: int
    image: PageImage | None = None
    text: str | None = None
    text_ok: bool = False
    text_score: float | None = None
    text_reasons: tuple[str, ...] = ()
    blank: bool = False
    reason: str | None = None
    error: str | None = None
    elapsed_s: float = 0.0
    attributes: dict[str, object] = field(default_factory=dict)
    #: The text layer's blocks (paragraphs with their lines' boxes), beside ``text``.
    text_blocks: tuple[Block, ...] = ()


def probe_document(job: ProbeJob) -> DocumentProbe:
    """Open a document and count its pages."""
    try:
        if job.kind == "pdf":
            pdf, password_index = open_pdf(job.path, job.passwords)
            try:
                return DocumentProbe(page_count(pdf), password_index)
            finally:
                pdf.close()
        image = open_image(job.path, max_image_pixels=job.max_image_pixels)
        with image:
            return DocumentProbe(frame_count(image))
    except RenderError as exc:
        return DocumentProbe(reason=exc.reason, error=str(exc))
    except Exception as exc:  # PDFium and PIL raise many things on hostile input
        return DocumentProbe(reason=Reason.CORRUPT, error=f"{type(exc).__name__}: {exc}")


def render_pages(job: PageJob) -> list[RenderedPage]:
    """Render the pages of one job, each independently."""
    try:
        if job.kind == "pdf":
            return _render_pdf_pages(job)
        return _render_image_frames(job)
    except RenderError as exc:
        return [RenderedPage(p, reason=exc.reason, error=str(exc)) for p in job.pages]


def _render_pdf_pages(job: PageJob) -> list[RenderedPage]:
    pdf, _ = open_pdf(job.path, (job.password,) if job.password else ())
    try:
        if job.spec.text_layer != "only":
            pdf.init_forms()  # so filled form fields show in the rendered page
        rotations = dict(job.rotations)
        return [_one_pdf_page(pdf, p, job, rotations.get(p, 0)) for p in job.pages]
    finally:
        pdf.close()


def _one_pdf_page(
    pdf: pdfium.PdfDocument, number: int, job: PageJob, rotation: int
) -> RenderedPage:
    started = time.perf_counter()
    try:
        page = pdf[number - 1]
    except Exception as exc:
        return RenderedPage(number, reason=Reason.CORRUPT, error=f"cannot load page: {exc}")
    try:
        return _route_pdf_page(page, number, job, rotation, started)
    except RenderError as exc:
        return RenderedPage(number, reason=exc.reason, error=str(exc))
    except MemoryError:  # over the render process's cap: a bomb, or a cap to raise
        return RenderedPage(number, reason=Reason.TOO_LARGE, error=OUT_OF_MEMORY)
    except Exception as exc:
        return RenderedPage(
            number, reason=Reason.RENDER_ERROR, error=f"{type(exc).__name__}: {exc}"
        )
    finally:
        page.close()


def _route_pdf_page(
    page: object, number: int, job: PageJob, rotation: int, started: float
) -> RenderedPage:
    spec = job.spec
    # The text layer is read even with --text-layer off (about 2 ms a page): a good one is
    # the fallback when the engine cannot read the page.
    layer = _read_text_layer(page, required=spec.text_layer == "only")
    use_text = spec.text_layer == "only" or (
        layer.ok and (spec.text_layer == "auto" or (spec.text_layer == "redo" and not layer.hidden))
    )
    if use_text and not job.force_image and not rotation:
        return RenderedPage(
            number,
            text=layer.text,
            text_ok=layer.ok,
            text_score=layer.score,
            text_reasons=layer.reasons,
            elapsed_s=time.perf_counter() - started,
            text_blocks=layer.blocks,
        )
    image = render_pdf_page(
        page,
        scale=_pdf_scale(page, spec, layer.scan_dpi),
        max_page_points=spec.max_page_points,
        max_pixels=spec.max_pixels,
        rotation=rotation,
    )
    finished = _finish_image(
        number,
        image,
        spec,
        started,
        text=layer.text,
        ok=layer.ok,
        score=layer.score,
        reasons=layer.reasons,
        dpi=_page_dpi(page, image),
    )
    return replace(finished, text_blocks=layer.blocks) if finished.text else finished


def _page_dpi(page: pdfium.PdfPage, image: Image.Image) -> float | None:
    width, height = page.get_size()
    return pixels_per_inch(image, width / 72, height / 72)


def _pdf_scale(page: pdfium.PdfPage, spec: RenderSpec, scan_dpi: float) -> float:
    """Pixels a point: a resolution is shrunk to fit ``max_pixels`` (a poster at 300 dpi),
    a pixel target is not (an absurd page fails as too large)."""
    width, height = page.get_size()
    scale = spec.resolution.pdf_scale(width, height, scan_dpi)
    if spec.dpi is None or width <= 0 or height <= 0:
        return scale
    return fit_pixels(scale, width, height, spec.max_pixels)


@dataclass(frozen=True, slots=True)
class _LayerVerdict:
    """A page's text layer, its verdict, its blocks and the resolution of its scan."""

    text: str | None = None
    ok: bool = False
    score: float | None = None
    reasons: tuple[str, ...] = ()
    blocks: tuple[Block, ...] = ()
    scan_dpi: float = 0.0
    #: Most of its text is invisible: an earlier OCR's layer (``--text-layer redo``).
    hidden: bool = False


def _read_text_layer(page: pdfium.PdfPage, *, required: bool) -> _LayerVerdict:
    """The text layer, its verdict and its blocks; an unreadable layer is "no layer"
    unless required."""
    try:
        layer = extract_text_layer(page)
    except RenderError:
        if required:
            raise
        return _LayerVerdict(reasons=("unreadable_text_layer",))
    quality = score_text_layer(layer)
    return _LayerVerdict(
        layer.text,
        quality.ok,
        quality.score,
        quality.reasons,
        layer.blocks,
        layer.scan_dpi,
        hidden=layer.hidden_share >= HIDDEN_LAYER_SHARE,
    )


def _render_image_frames(job: PageJob) -> list[RenderedPage]:
    image = open_image(job.path, max_image_pixels=job.spec.max_image_pixels)
    rotations = dict(job.rotations)
    with image:
        return [_one_frame(image, p, job.spec, rotations.get(p, 0)) for p in job.pages]


def _one_frame(image: Image.Image, number: int, spec: RenderSpec, rotation: int) -> RenderedPage:
    started = time.perf_counter()
    if spec.text_layer == "only":
        return RenderedPage(number, text=None, text_reasons=("no_text_layer",))
    try:
        frame = render_frame(image, number, resolution=spec.resolution, max_pixels=spec.max_pixels)
        if rotation:
            frame = frame.rotate(-rotation, expand=True)
    except RenderError as exc:
        return RenderedPage(number, reason=exc.reason, error=str(exc))
    except MemoryError:  # over the render process's cap: a bomb, or a cap to raise
        return RenderedPage(number, reason=Reason.TOO_LARGE, error=OUT_OF_MEMORY)
    except Exception as exc:
        return RenderedPage(
            number, reason=Reason.RENDER_ERROR, error=f"{type(exc).__name__}: {exc}"
        )
    return _finish_image(number, frame, spec, started, dpi=_frame_dpi(image, frame))


def _frame_dpi(image: Image.Image, frame: Image.Image) -> float | None:
    """The rendered frame's resolution, from the resolution its image file states."""
    stated = image.info.get("dpi")
    try:
        dpi = float(stated[0]) if stated else 0.0
    except (TypeError, ValueError, IndexError, ArithmeticError):
        return None  # a resolution that is no number (a hostile file): Tesseract guesses
    if not 0 < dpi < 10_000 or image.width <= 0:
        return None
    return pixels_per_inch(frame, image.width / dpi, image.height / dpi)


def _finish_image(
    number: int,
    image: Image.Image,
    spec: RenderSpec,
    started: float,
    *,
    text: str | None = None,
    ok: bool = False,
    score: float | None = None,
    reasons: tuple[str, ...] = (),
    dpi: float | None = None,
) -> RenderedPage:
    blank = is_blank_image(image) and not (text and text.strip())
    if spec.encoding == "raw" and not blank and is_gray(image):
        # A third of the bytes to hand over and hold until read: a 400-dpi A4 scan is 46 MB
        # of RGB. The CPU engines read gray as it is.
        image = image.convert("L")
    encoded = None if blank else encode_image(image, spec.encoding, dpi)
    return RenderedPage(
        number,
        image=encoded,
        text=text,
        text_ok=ok,
        text_score=score,
        text_reasons=reasons,
        blank=blank,
        elapsed_s=time.perf_counter() - started,
    )


def is_gray(image: Image.Image) -> bool:
    """Whether an RGB image's three channels are equal (a gray or black-and-white scan as
    PDFium renders it), judged on every eighth pixel each way."""
    if image.mode != "RGB":
        return image.mode == "L"
    red, green, blue = image.reduce(8).split()
    same = ImageChops.difference(red, green).getbbox() is None
    return same and ImageChops.difference(green, blue).getbbox() is None


def encode_image(image: Image.Image, encoding: str, dpi: float | None = None) -> PageImage:
    """Pack ``image`` for an engine: raw pixels, or a PNG/JPEG file; ``dpi`` its resolution
    where known."""
    if encoding == "raw":
        return PageImage(image.tobytes(), image.width, image.height, "raw", image.mode, dpi)
    buffer = io.BytesIO()
    if encoding == "jpeg":
        image.save(buffer, format="JPEG", quality=92)
    else:
        image.save(buffer, format="PNG", compress_level=1)
    return PageImage(buffer.getvalue(), image.width, image.height, encoding, image.mode, dpi)


def pixels_per_inch(image: Image.Image, width_in: float, height_in: float) -> float | None:
    """``image``'s resolution as a page ``width_in`` × ``height_in`` inches (either way
    round: a turned page), or None for a page of no size."""
    longest = max(width_in, height_in)
    return max(image.width, image.height) / longest if longest > 0 else None


def decode_image(image: PageImage) -> Image.Image:
    """The inverse of ``encode_image``."""
    if image.encoding == "raw":
        return Image.frombytes(image.mode, (image.width, image.height), image.data)
    with Image.open(io.BytesIO(image.data)) as opened:
        return opened.convert("RGB")
