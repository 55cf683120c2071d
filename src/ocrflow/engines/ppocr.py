"""The PP-OCR models of the embedded engine, inside the ``rapidocr`` wheel: the detector,
the 0°/180° line classifier and the recogniser, loaded by path (nothing is ever downloaded)
and called one step at a time through rapidocr's wrappers (pre- and post-processing)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ocrflow.engines.geometry import Quads
from ocrflow.engines.runtime import attach
from ocrflow.errors import EngineError


@dataclass(frozen=True, slots=True)
class PpocrModels:
    """The three PP-OCR models, as rapidocr's wrappers (pre- and post-processing)."""

    detector: Any
    classifier: Any
    recognizer: Any

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
    ) -> PpocrModels:
        """Build the models from the wheel's own files, run by ``backend`` (``runtime.py``)
        with ``threads`` threads a call and ``streams`` calls at once, the detector's input
        at most ``det_side`` px, ``rec_batch`` and ``cls_batch`` lines per recogniser and
        classifier call; raise ``EngineError`` if they are absent."""
        try:
            from rapidocr import RapidOCR
        except ImportError as exc:
            raise EngineError(
                "the embedded engine needs rapidocr: pip install rapidocr onnxruntime"
            ) from exc
        files = bundled_model_files()
        try:
            params = _rapidocr_params(files, det_side, rec_batch, cls_batch)
            ocr = RapidOCR(params=params)
            # rapidocr's loaders build each wrapper; we call the steps one by one.
            models = cls(ocr._load_det_model(), ocr._load_cls_model(), ocr._load_rec_model())
            for wrapper, task in zip(models.wrappers(), ("det", "cls", "rec"), strict=True):
                attach(
                    wrapper,
                    files[task],
                    backend=backend,
                    threads=threads,
                    streams=streams,
                    task=task,
                )
        except Exception as exc:  # rapidocr and onnxruntime raise plain exceptions
            raise EngineError(f"cannot load the PP-OCR models: {last_line(exc)}") from exc
        return models

    def wrappers(self) -> tuple[Any, Any, Any]:
        """Detector, classifier, recogniser."""
        return self.detector, self.classifier, self.recognizer

    def detect(self, bgr: np.ndarray) -> Quads:
        """Line quads in ``bgr``'s own pixels (an empty array when there is no text)."""
        boxes = self.detector(bgr).boxes
        return np.zeros((0, 4, 2), np.float32) if boxes is None else np.asarray(boxes, np.float32)

    def crop(self, bgr: np.ndarray, quad: np.ndarray) -> np.ndarray:
        """The line under ``quad``, straightened (a tall crop is turned to lie flat)."""
        from rapidocr.utils.process_img import get_rotate_crop_image

        return get_rotate_crop_image(bgr, quad.copy())

    def upside_down_share(self, crops: list[np.ndarray]) -> float:
        """Share of the text, by line length, that the line classifier reads as 180°."""
        results = self.classifier(crops).cls_res
        lengths = np.array([line_length(c) for c in crops])
        flipped = np.array([label == "180" for label, _ in results])
        return float(lengths[flipped].sum() / lengths.sum())

    def read_lines(
        self, crops: list[np.ndarray], margin: float
    ) -> tuple[tuple[str, ...], tuple[float, ...]]:
        """Text and confidence of each crop, read with ``margin`` (see ``_with_margin``)."""
        from rapidocr.ch_ppocr_rec import TextRecInput

        output = self.recognizer(TextRecInput(img=[_with_margin(c, margin) for c in crops]))
        return tuple(output.txts), tuple(float(s) for s in output.scores)

    def mean_score(self, crops: list[np.ndarray], margin: float) -> float:
        """Mean recogniser confidence over ``crops``."""
        return float(np.mean(self.read_lines(crops, margin)[1]))


def bundled_model_files() -> dict[str, Path]:
    """The detector, classifier and recogniser ONNX files inside the rapidocr wheel.

    Given to rapidocr by path, so that it never tries to download a model.
    """
    import rapidocr

    folder = Path(rapidocr.__file__).parent / "models"
    found = {task: sorted(folder.glob(f"*_{task}*.onnx")) for task in ("det", "cls", "rec")}
    if any(len(paths) != 1 for paths in found.values()):
        names = sorted(p.name for p in folder.glob("*.onnx"))
        raise EngineError(f"expected one det, cls and rec model in {folder}, found {names}")
    return {task: paths[0] for task, paths in found.items()}


def _rapidocr_params(
    models: dict[str, Path], det_side: int, rec_batch: int, cls_batch: int
) -> dict[str, Any]:
    return {
        "Global.log_level": "error",  # rapidocr logs every model it loads at INFO
        # One thread here: ``runtime.attach`` swaps in the sessions that need more.
        "EngineConfig.onnxruntime.intra_op_num_threads": 1,
        "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        "Det.model_path": str(models["det"]),
        "Det.limit_type": "max",
        "Det.limit_side_len": det_side,
        "Cls.model_path": str(models["cls"]),
        "Cls.cls_batch_num": cls_batch,
        "Rec.model_path": str(models["rec"]),
        "Rec.rec_batch_num": rec_batch,
        # rapidocr pads every line to at least 320 px wide; short lines need not be.
        "Rec.rec_img_shape": [3, 48, 48],
    }


def line_length(crop: np.ndarray) -> float:
    """A line's length in text heights."""
    return crop.shape[1] / max(crop.shape[0], 1)


def _with_margin(crop: np.ndarray, margin: float) -> np.ndarray:
    """``crop`` with ``margin`` × its height of background (the median colour of its top
    and bottom rows) added above and below: the recogniser scales lines to 48 px high, so
    a taller crop is a narrower input."""
    pad = round(crop.shape[0] * margin / 2)
    if pad <= 0:
        return crop
    background = np.median(np.concatenate([crop[0], crop[-1]]), axis=0).astype(np.uint8)
    padded = np.empty((crop.shape[0] + 2 * pad, *crop.shape[1:]), np.uint8)
    padded[:] = background
    padded[pad : pad + crop.shape[0]] = crop
    return padded


def last_line(exc: Exception) -> str:
    """The last line of an error message (rapidocr wraps whole tracebacks in its errors)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"
