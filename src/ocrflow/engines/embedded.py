"""The embedded CPU OCR engine: the PP-OCR models of the ``rapidocr`` wheel, run by OpenVINO
where it is installed (the default on Linux x86_64, macOS arm64 and Windows) or ONNX Runtime
(``runtime.py``: OpenVINO takes 1.7x less CPU, 3x on CPUs with bf16), with PaddleOCR's pre-
and post-processing (``ppocr.py``).

Offline by construction: the detector, line classifier and recogniser are the ONNX files
inside the ``rapidocr`` wheel, loaded by path, so nothing is ever downloaded. A page is:

1. detected at the size that makes its text ``det_text_px`` high, at most ``det_side`` px
   (``detsize.py``: the detector's cost grows with pixels; the recogniser's does not:
   every line is scaled to 48 px high whatever the resolution), and again closer up on
   rows where it ran two lines into one box (``line_detection.py``);
2. turned a quarter clockwise when most of its text lies in boxes taller than wide (free:
   the boxes turn with the page, no second detection);
3. turned half round when the 0°/180° classifier suspects it (its 12 longest lines) and
   the recogniser, reading the 6 longest lines both ways, is surer of them turned;
4. recognised line by line from the full-resolution page, each crop padded by
   ``line_margin`` of its height, and laid out in reading order (``layout.py``: deskewed,
   tables as Markdown, header first, columns one after another, footer last).

On an upright page orientation costs one classifier call on 12 crops: 2-7 ms CPU, under
2 % of the page. A suspect page (turned, or misread by the classifier) pays 12 line reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import io
import logging
import math
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from ocrflow.cancellation import run_to_end
from ocrflow.config.machine import usable_cpus
from ocrflow.engines.geometry import (
    PageFrame,
    is_sideways,
    line_length,
    ocr_blocks,
    turn_quads_half,
    turn_quads_quarter,
)
from ocrflow.engines.gutters import split_at_gutters
from ocrflow.engines.ink import to_ink_paragraphs
from ocrflow.engines.layout import TextBox, laid_out
from ocrflow.engines.line_detection import detect_lines
from ocrflow.engines.line_threads import LineThreads
from ocrflow.engines.rules import horizontal_rules
from ocrflow.engines.runtime import resolve_backend
from ocrflow.engines.skew import page_skew
from ocrflow.errors import ConfigError, EngineError, EngineRejected
from ocrflow.types import Block, EngineReply, PageImage, PageRequest

if TYPE_CHECKING:
    # Imported on first use: the models' steps bring OpenCV and the runtimes.
    from ocrflow.engines.ppocr import PpocrModels
    from ocrflow.engines.ppocr_recognizer import PageLines

logger = logging.getLogger(__name__)

#: Lines the 0°/180° classifier looks at (the longest: most text, least ambiguity), the
#: share of their text read as 180° that makes the page suspect, and the lines the
#: recogniser then reads both ways to decide.
CLASSIFY_LINES = 12
SUSPECT_SHARE = 0.3
CONFIRM_LINES = 6
#: ``EmbeddedOptions.charset`` values.
CHARSETS = ("auto", "all")
#: The name of the threads that free closed engines' models: only memory is left to them,
#: so a process leaving once its work is done need not wait for them (``ocrflow.cli``).
RELEASE_THREAD = "ocrflow-release-models"


@dataclass(frozen=True, slots=True)
class EmbeddedOptions:
    """Tuning of the embedded engine; the defaults are measured (bench/bench_engines.py)."""

    #: ONNX Runtime intra-op threads per model call. One does the most work per core; two
    #: (without spinning) cut a lone page's wall time by about 40 % for 20 % more CPU.
    threads: int = 1
    #: Longest side of the detector's input at most; 1600 keeps a 1288 px page at full size.
    det_side: int = 1600
    #: Below that, the detector's input is scaled to make the page's median character this
    #: many pixels high (``detsize.py``; 0: always ``det_side``).
    det_text_px: float = 13.0
    #: Background added above and below each line, as a share of its height: 0.25 makes
    #: the recogniser's input 20 % narrower (faster) at no measured loss of accuracy.
    line_margin: float = 0.25
    #: Lines per recogniser call; batches are padded to their widest line, so 1 is fastest.
    rec_batch: int = 1
    #: Lines read with a lower confidence are dropped (rapidocr's default).
    min_score: float = 0.5
    detect_rotation: bool = True
    #: Inference runtime (``runtime.py``): "auto" is OpenVINO when installed (0.33-0.60x ONNX
    #: Runtime's CPU a page, docs/embedded-engine.md), else ONNX Runtime; or either by name.
    backend: str = "auto"
    #: "auto": on OpenVINO, lines are read first by the recogniser cut down to alphabetic
    #: scripts (``ppocr_charset.py``: 17 % less CPU a Latin page, the same text), and by
    #: the whole one where that is unsure; "all": by the whole one only.
    charset: str = "auto"

    def __post_init__(self) -> None:
        if self.charset not in CHARSETS:
            raise ConfigError(f"embedded charset {self.charset!r} is not 'auto' or 'all'")


@dataclass(frozen=True, slots=True)
class OcrText:
    """What the engine read on one page."""

    text: str
    #: Degrees clockwise the page was turned to read it upright: 0, 90, 180 or 270.
    rotation: int = 0
    boxes: tuple[TextBox, ...] = ()
    #: Seconds per step ("detect", "classify", "recognize", "layout", "blocks").
    timings: dict[str, float] = field(default_factory=dict)
    #: The page's paragraphs, tables and running header/footer in reading order, boxes in
    #: 0..1 of the image as it was given (before any turn).
    blocks: tuple[Block, ...] = ()
    #: Degrees the printed lines run down to the right, on the page as read (turned).
    skew: float = 0.0

    @property
    def mean_confidence(self) -> float:
        """Mean recogniser score of the kept boxes (0.0 when there are none)."""
        return float(np.mean([b.score for b in self.boxes])) if self.boxes else 0.0


class EmbeddedEngine:
    """CPU OCR engine honouring the ``Engine`` protocol; cheap to build, loads on first use.

    Keyword options are those of ``EmbeddedOptions``. ``max_parallel`` bounds concurrent
    ``infer`` calls, each one page in a worker thread; ``threads=None`` shares the cores
    among them (at most 4 a page). The models are shared and thread-safe, so ``recognize``
    may also be called from several threads.
    """

    name = "embedded"
    #: The resolution pages are rendered at (``render/resolution.py``): the detector shrinks
    #: a page to its own size anyway, the recogniser reads each line from the page's pixels.
    reading_dpi = 300.0
    max_scan_dpi = 400.0
    image_encoding = "raw"

    def __init__(
        self, *, threads: int | None = None, max_parallel: int = 1, **options: Any
    ) -> None:
        options["threads"] = threads or default_threads(max_parallel)
        self.options = EmbeddedOptions(**options)
        self._models: PpocrModels | None = None
        self._load_lock = threading.Lock()
        self._preloading: threading.Thread | None = None
        self._slots = asyncio.Semaphore(max_parallel)
        self._parallel = max_parallel
        self._line_threads = LineThreads(max_parallel)

    async def infer(self, request: PageRequest) -> EngineReply:
        """Read one page image; ``EngineRejected`` when the image cannot be decoded."""
        started = time.perf_counter()
        async with self._slots:
            # A thread cannot be stopped: a cancelled read keeps its slot until it ends, so
            # that no more than ``max_parallel`` pages are ever being read, timeouts or not.
            # The page is decoded there too: a 400-dpi page is 50 MB to convert, which
            # held the event loop (and every other page's I/O) for 0.1 s.
            result = await run_to_end(asyncio.to_thread(self._read_image, request.image))
        return EngineReply(
            text=result.text,
            latency_s=time.perf_counter() - started,
            rotation=result.rotation,
            engine="rapidocr",
            attributes={
                "boxes": len(result.boxes),
                "mean_confidence": result.mean_confidence,
                "skew": result.skew,
            },
            blocks=result.blocks,
        )

    def preload(self) -> None:
        """Start loading the models in a background thread, so that the load overlaps what
        the caller does before its first page (rendering it); the first ``infer`` waits for
        it. A failed load is left for that ``infer`` to retry and report."""

        def load() -> None:
            with contextlib.suppress(EngineError):
                self._loaded()

        self._preloading = threading.Thread(target=load, name="ocrflow-embedded-load", daemon=True)
        self._preloading.start()

    async def aclose(self) -> None:
        """Drop the models once a load in progress has ended; a later call loads them again.

        A run that never needed the engine (text-layer pages only) closes it at once: a
        process that then exits while the runtime compiles in the load thread is aborted
        ("terminate called without an active exception"), so the load is waited for.
        The models are freed in a thread of their own (``RELEASE_THREAD``): their
        destructors join the runtime's threads, 0.2-0.3 s that the end of a run need not
        wait for.
        """
        loading, self._preloading = self._preloading, None
        if loading is not None:
            await asyncio.to_thread(loading.join)
        with self._load_lock:
            held = [self._models] if self._models is not None else []
            self._models = None
        if held:
            # The thread holds the last reference, so the destructors run there. Not a
            # daemon: an interpreter that exits waits for it, never cuts a destructor short.
            threading.Thread(target=held.clear, name=RELEASE_THREAD).start()
        await asyncio.to_thread(self._line_threads.close)

    def recognize(self, image: Image.Image) -> OcrText:
        """Read a PIL image synchronously (benchmarks, tests, scripts)."""
        return self.recognize_array(np.asarray(image.convert("RGB")))

    def recognize_array(self, rgb: np.ndarray) -> OcrText:
        """Read RGB ``uint8`` pixels of shape (height, width, 3) synchronously."""
        import cv2  # installed with rapidocr, as the models are

        return self._recognize_bgr(cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR))

    def _read_image(self, image: PageImage) -> OcrText:
        return self._recognize_bgr(decode_page_bgr(image))

    def _recognize_bgr(self, bgr: np.ndarray) -> OcrText:
        models = self._loaded()
        try:
            return _read_page(models, bgr, self.options)
        except Exception as exc:  # the runtimes and OpenCV raise plain exceptions
            from ocrflow.engines.ppocr import last_line

            raise EngineError(f"embedded OCR failed: {last_line(exc)}") from exc
        finally:
            _return_freed_memory()

    def _loaded(self) -> PpocrModels:
        with self._load_lock:
            if self._models is None:
                from ocrflow.engines.ppocr import PpocrModels

                options = self.options
                self._models = PpocrModels.load(
                    threads=options.threads,
                    det_side=options.det_side,
                    rec_batch=options.rec_batch,
                    cls_batch=CLASSIFY_LINES,
                    backend=resolve_backend(options.backend),
                    streams=self._parallel,
                    charset=options.charset,
                    line_threads=self._line_threads,
                )
                logger.debug("loaded the PP-OCR models with %s", self.options)
            return self._models


def _return_freed_memory() -> None:
    """Give the page's freed activations back to the OS. glibc keeps freed blocks in
    per-thread arenas, so without this the process grows by hundreds of MB over a run of
    varied page sizes (measured: 1.3 GB after 30 corpus images, instead of ~400 MB)."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def default_threads(parallel: int) -> int:
    """Threads per page when ``parallel`` pages run at once: the cores shared out, 1 to 4."""
    return max(1, min(4, usable_cpus() // max(1, parallel)))


def _read_page(models: PpocrModels, bgr: np.ndarray, options: EmbeddedOptions) -> OcrText:
    """Detect, orient, recognise and lay out one page (see the module docstring)."""
    clock = _Clock()
    quads = detect_lines(models, bgr, options.det_side, options.det_text_px)
    clock.lap("detect")
    if len(quads) == 0:
        return OcrText(text="", timings=clock.laps)
    rotation = 0
    if options.detect_rotation and is_sideways(quads):
        quads = turn_quads_quarter(quads, bgr.shape[0])
        bgr, rotation = np.ascontiguousarray(np.rot90(bgr, k=-1)), 90
    quads = split_at_gutters(quads, bgr)
    page = models.page_lines([models.crop(bgr, quad) for quad in quads], options.line_margin)
    turned = _turned_if_upside_down(models, page) if options.detect_rotation else None
    if turned is not None:
        page = turned
        quads = turn_quads_half(quads, bgr.shape[1], bgr.shape[0])
        rotation += 180
    clock.lap("classify")
    texts, scores = models.read_page(page)
    clock.lap("recognize")
    boxes = tuple(
        TextBox.from_quad(quad, text, score)
        for quad, text, score in zip(quads, texts, scores, strict=True)
        if text.strip() and score >= options.min_score
    )
    # The boxes of an upside-down page are turned; the image is, to be read with them.
    upright = bgr if turned is None else np.ascontiguousarray(bgr[::-1, ::-1])
    paragraphs = laid_out(boxes, rules=horizontal_rules(upright))
    clock.lap("layout")
    # The model keeps lines as printed (``ink.py``).
    printed = to_ink_paragraphs(paragraphs, upright)
    blocks = ocr_blocks(printed, PageFrame(bgr.shape[1], bgr.shape[0], rotation))
    clock.lap("blocks")
    text = "\n\n".join(paragraph.text for paragraph in paragraphs)
    skew = math.degrees(page_skew([b for b in boxes if b.text.strip()]))
    return OcrText(text, rotation, boxes, clock.laps, blocks, round(skew, 2))


class _Clock:
    """Seconds spent in each step, for ``OcrText.timings``."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = now - self._last
        self._last = now


def _turned_if_upside_down(models: PpocrModels, page: PageLines) -> PageLines | None:
    """``page``'s lines turned 180° when the page is upside down, else None. The line
    classifier is asked about the longest lines; when a fair share of their text reads as
    180°, the recogniser decides: the page is upside down when it is surer of the turned
    lines. The classifier alone misreads tiny print, old type and some scripts (it squeezes
    a whole line into 48 × 192 px); the recogniser's confidence does not. The readings are
    kept: the lines read here are not read again."""
    crops = page.crops
    longest = sorted(range(len(crops)), key=lambda i: line_length(crops[i]), reverse=True)
    if models.upside_down_share([crops[i] for i in longest[:CLASSIFY_LINES]]) < SUSPECT_SHARE:
        return None
    probe = longest[:CONFIRM_LINES]
    turned = page.turned()
    return turned if models.mean_score(turned, probe) > models.mean_score(page, probe) else None


def decode_page_image(image: PageImage) -> np.ndarray:
    """RGB ``uint8`` pixels of a ``PageImage``: raw "RGB"/"L" bytes, or an encoded file."""
    import cv2

    return cv2.cvtColor(decode_page_bgr(image), cv2.COLOR_BGR2RGB)


def decode_page_bgr(image: PageImage) -> np.ndarray:
    """BGR ``uint8`` pixels (the models' order) of a ``PageImage``: raw "RGB"/"L" bytes,
    or an encoded file; ``EngineRejected`` when they cannot be decoded."""
    import cv2

    if image.encoding != "raw":
        try:
            with Image.open(io.BytesIO(image.data)) as opened:
                rgb = np.asarray(opened.convert("RGB"))
        except (OSError, ValueError) as exc:
            raise EngineRejected(f"cannot decode {image.encoding} page image: {exc}") from exc
        return cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    channels = {"RGB": 3, "L": 1}.get(image.mode)
    if channels is None:
        raise EngineRejected(f"raw page image mode {image.mode!r} is not RGB or L")
    expected = image.width * image.height * channels
    if len(image.data) != expected or expected == 0:
        raise EngineRejected(
            f"raw {image.mode} page image of {image.width}x{image.height} needs "
            f"{expected} bytes, got {len(image.data)}"
        )
    pixels = np.frombuffer(image.data, np.uint8).reshape(image.height, image.width, channels)
    return cv2.cvtColor(pixels, cv2.COLOR_GRAY2BGR if channels == 1 else cv2.COLOR_RGB2BGR)
