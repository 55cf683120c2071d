"""The PP-OCR models of the embedded engine, inside the ``rapidocr`` wheel: the detector,
the 0°/180° line classifier and the recogniser, loaded by path (nothing is ever downloaded)
and called one step at a time, with PaddleOCR's pre- and post-processing (``ppocr_det.py``,
``ppocr_lines.py``). Only the wheel's model files are used: rapidocr's own pipeline and its
configuration loader (0.95 s a run) are never imported."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import cv2
import numpy as np

from ocrflow.engines.geometry import Quads, line_length
from ocrflow.engines.line_threads import LineThreads
from ocrflow.engines.ppocr_charset import (
    alphabetic_classes,
    alphabetic_model,
    head_model,
    is_alphabetic,
    looks_cut,
    needs_whole_recogniser,
)
from ocrflow.engines.ppocr_det import db_quads, detector_input
from ocrflow.engines.ppocr_dethead import quarter_resolution_head
from ocrflow.engines.ppocr_lines import CtcDecoder, classifier_input, classifier_labels
from ocrflow.engines.ppocr_recognizer import LineModel, PageLines
from ocrflow.engines.runtime import Session, open_session, prime_openvino
from ocrflow.errors import EngineError

logger = logging.getLogger(__name__)

#: The longest lines of a page, read first by the whole recogniser: when any holds a
#: character of another script, the whole recogniser reads the page. Two find a page of
#: another script at once; a page that slips past them is caught by its doubtful lines.
PROBE_LINES = 2
#: Doubtful lines (``ppocr_charset.needs_whole_recogniser``) read again by the whole
#: recogniser: all of them up to this many, else this share of them (most likely first).
MIN_DOUBT_CHECKS = 32
DOUBT_CHECK_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class PpocrModels:
    """The PP-OCR models as runtime sessions, and how they are fed."""

    detector: Session
    classifier: Session
    recognizer: LineModel
    #: The recogniser cut down to alphabetic scripts (``ppocr_charset.py``), or None.
    alphabetic: LineModel | None
    #: Longest side of the detector's input at most.
    det_side: int
    #: Lines per recogniser and classifier call.
    rec_batch: int
    cls_batch: int

    @classmethod
    def load(
        cls,
        *,
        threads: int,
        det_side: int,
        rec_batch: int,
        cls_batch: int,
        backend: str = "onnxruntime",
        streams: int = 1,
        charset: str = "all",
        line_threads: LineThreads | None = None,
    ) -> PpocrModels:
        """Build the models from the wheel's own files, run by ``backend`` (``runtime.py``)
        with ``threads`` threads a call and ``streams`` calls at once, the detector's input
        at most ``det_side`` px, ``rec_batch`` and ``cls_batch`` lines per recogniser and
        classifier call; ``charset`` "auto" adds the alphabetic recogniser (OpenVINO only).
        Raise ``EngineError`` if the models are absent or cannot be loaded."""
        files = bundled_model_files()
        tasks = ["det", "cls", "rec"]
        if charset == "auto" and backend == "openvino":
            tasks += ["rec-alphabetic", "rec-head"]

        def session(task: str) -> Session | None:
            edit = _EDITS.get(task) if backend == "openvino" else None

            def opened(change: Callable[[Any], Any] | None) -> Session:
                return open_session(
                    files[task[:3]],
                    backend=backend,
                    threads=threads,
                    streams=streams,
                    task=_INPUTS.get(task, task),
                    edit=change,
                )

            try:
                return opened(edit)
            except ValueError as exc:
                if edit is None:
                    raise
                # Another model than the one measured: run it as it is (the alphabetic
                # recogniser is then left out: every line is read by the whole one).
                logger.warning("%s model left as it is: %s", task, exc)
                return opened(None) if task == "det" else None

        try:
            if backend == "openvino":
                prime_openvino()
            # The runtimes compile without the GIL: the models load faster side by side.
            with ThreadPoolExecutor(len(tasks), thread_name_prefix="ppocr-load") as pool:
                sessions = list(pool.map(session, tasks))
        except Exception as exc:  # onnxruntime and openvino raise plain exceptions
            raise EngineError(f"cannot load the PP-OCR models: {last_line(exc)}") from exc
        detector, classifier, whole, *parts = sessions
        assert detector is not None and classifier is not None and whole is not None
        cut, head = parts if parts and parts[0] is not None else (None, None)
        characters = whole.metadata("character")
        if not characters:
            raise EngineError(f"{files['rec'].name} carries no character list")
        known = characters.splitlines()
        alphabetic = None
        shared = line_threads or LineThreads(1)
        if cut is not None:
            kept = [known[i - 1] for i in alphabetic_classes(known)[1:-1]]
            alphabetic = LineModel(cut, CtcDecoder(kept), shared, keeps_features=True)
        recognizer = LineModel(whole, CtcDecoder(known), shared, head=head)
        return cls(detector, classifier, recognizer, alphabetic, det_side, rec_batch, cls_batch)

    def detect(self, bgr: np.ndarray, side_limit: int | None = None) -> Quads:
        """Line quads in ``bgr``'s own pixels (an empty array when there is no text), the
        image shrunk to at most ``side_limit`` px (default: the engine's ``det_side``)."""
        inputs = detector_input(bgr, side_limit or self.det_side)
        if inputs is None:
            return np.zeros((0, 4, 2), np.float32)
        return db_quads(self.detector(inputs), *bgr.shape[:2])

    def crop(self, bgr: np.ndarray, quad: np.ndarray) -> np.ndarray:
        """The line under ``quad``, straightened (a tall crop is turned to lie flat)."""
        return rotated_crop(bgr, quad)

    def upside_down_share(self, crops: list[np.ndarray]) -> float:
        """Share of the text, by line length, that the line classifier reads as 180°."""
        labels: list[str] = []
        for start in range(0, len(crops), self.cls_batch):
            batch = crops[start : start + self.cls_batch]
            labels += classifier_labels(self.classifier(classifier_input(batch)))
        lengths = np.array([line_length(c) for c in crops])
        flipped = np.array([label == "180" for label in labels])
        return float(lengths[flipped].sum() / lengths.sum())

    def page_lines(self, crops: list[np.ndarray], margin: float) -> PageLines:
        """``crops`` as the recogniser reads them, with ``margin``; none read yet."""
        return PageLines(crops, margin)

    def read_page(self, page: PageLines) -> tuple[tuple[str, ...], tuple[float, ...]]:
        """Text and confidence of each of ``page``'s lines, by the alphabetic recogniser
        first when there is one (``_read_alphabetic_first``); lines already read by a
        recogniser are not read by it again."""
        results = self._readings(page, list(range(len(page.lines))))
        page.forget_features()
        texts, scores = zip(*results.values(), strict=True) if results else ((), ())
        return tuple(texts), tuple(scores)

    def mean_score(self, page: PageLines, chosen: list[int]) -> float:
        """Mean confidence of ``page``'s ``chosen`` lines, read as the page would be."""
        return float(np.mean([score for _, score in self._readings(page, chosen).values()]))

    def _readings(self, page: PageLines, chosen: list[int]) -> dict[int, tuple[str, float]]:
        """The ``chosen`` lines' readings in their order."""
        if self.alphabetic is None:
            results = page.read(self.recognizer, chosen, self.rec_batch)
        else:
            results = self._read_alphabetic_first(self.alphabetic, page, chosen)
        return {i: results[i] for i in chosen}

    def _read_alphabetic_first(
        self, alphabetic: LineModel, page: PageLines, chosen: list[int]
    ) -> dict[int, tuple[str, float]]:
        """The longest lines by the whole recogniser: when any holds a character the
        alphabetic recogniser cannot say, the rest too. Else the rest by the alphabetic one,
        and the lines it is unsure of again by the whole one (all of them, or enough of
        them: ``MIN_DOUBT_CHECKS``); when one of those holds such characters, the page has
        another script after all and every line is read whole."""
        lines, batch = page.lines, self.rec_batch
        order = sorted(chosen, key=lambda i: line_length(lines[i]), reverse=True)
        probe, rest = order[:PROBE_LINES], order[PROBE_LINES:]
        results = page.read(self.recognizer, probe, batch)
        if not _all_alphabetic(results.values()):
            return results | page.read(self.recognizer, rest, batch)
        results.update(page.read(alphabetic, rest, batch))
        doubtful = [i for i in rest if needs_whole_recogniser(*results[i], line_length(lines[i]))]
        # The lines most likely to hide another script first (dropped characters leave
        # gaps), then the least sure; a page of many doubtful lines (a noisy form: 214 of
        # 267) is taken as alphabetic once enough of them read so, not all of them twice.
        doubtful.sort(
            key=lambda i: (not looks_cut(results[i][0], line_length(lines[i])), results[i][1])
        )
        enough = max(MIN_DOUBT_CHECKS, math.ceil(DOUBT_CHECK_SHARE * len(doubtful)))
        again = page.read(self.recognizer, doubtful[:enough], batch)
        if not _all_alphabetic(again.values()):
            # A confident alphabetic reading may have dropped another script's characters
            # silently (read as CTC blanks): only the whole recogniser can tell.
            sure = [i for i in rest if i not in again]
            results.update(again)
            results.update(page.read(self.recognizer, sure, batch))
        return results


#: How OpenVINO's models are rewritten before they are compiled (same arithmetic or, for
#: the alphabetic recogniser, fewer classes): task -> edit of the model read from the file.
_EDITS: Mapping[str, Callable[[Any], Any]] = MappingProxyType(
    {"det": quarter_resolution_head, "rec-alphabetic": alphabetic_model, "rec-head": head_model}
)
#: What a task's model takes in when that is not its file's own input: the head reads
#: features, not lines (``open_session`` pads a line's width).
_INPUTS: Mapping[str, str] = MappingProxyType({"rec-alphabetic": "rec", "rec-head": "features"})


def _all_alphabetic(readings: Iterable[tuple[str, float]]) -> bool:
    """Whether every character of these readings is one the alphabetic recogniser knows."""
    return all(is_alphabetic(c) for text, _ in readings for c in text)


def bundled_model_files() -> dict[str, Path]:
    """The detector, classifier and recogniser ONNX files inside the rapidocr wheel.

    Read by path from the installed wheel: nothing is ever downloaded.
    """
    try:
        import rapidocr
    except ImportError as exc:
        raise EngineError("the embedded engine needs rapidocr: pip install rapidocr") from exc
    folder = Path(rapidocr.__file__).parent / "models"
    found = {task: sorted(folder.glob(f"*_{task}*.onnx")) for task in ("det", "cls", "rec")}
    if any(len(paths) != 1 for paths in found.values()):
        names = sorted(p.name for p in folder.glob("*.onnx"))
        raise EngineError(f"expected one det, cls and rec model in {folder}, found {names}")
    return {task: paths[0] for task, paths in found.items()}


def rotated_crop(bgr: np.ndarray, quad: np.ndarray) -> np.ndarray:
    """The pixels under ``quad`` warped to an upright rectangle (cubic interpolation, edges
    replicated); a crop 1.5 times taller than wide is turned a quarter to lie flat."""
    width = int(max(np.linalg.norm(quad[0] - quad[1]), np.linalg.norm(quad[2] - quad[3])))
    height = int(max(np.linalg.norm(quad[0] - quad[3]), np.linalg.norm(quad[1] - quad[2])))
    corners = np.array([[0, 0], [width, 0], [width, height], [0, height]], np.float32)
    transform = cv2.getPerspectiveTransform(quad.astype(np.float32), corners)
    crop = cv2.warpPerspective(
        bgr, transform, (width, height), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_CUBIC
    )
    if crop.shape[0] >= 1.5 * crop.shape[1]:
        crop = np.rot90(crop)
    return crop


def last_line(exc: Exception) -> str:
    """The last line of an error message (the runtimes can put whole tracebacks in theirs)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"
