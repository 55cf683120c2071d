"""The PP-OCR text detector's input and output: the page scaled to multiples of 32 px and
normalised, and the DB (differentiable binarisation) probability map turned into line
quads.

This is PaddleOCR's post-processing with rapidocr's settings (``rapidocr/config.yaml``:
threshold 0.3, box score 0.5, unclip ratio 1.6, dilation on, fast scores), written here so
that loading the engine needs none of rapidocr's configuration machinery (its import parses
an 85 kB YAML file with OmegaConf: 0.95 s of every run's start). The results are the same
boxes, checked page by page in ``tests/unit/engines/test_ppocr_steps.py``.
"""

from __future__ import annotations

import cv2
import numpy as np
import pyclipper

from ocrflow.engines.geometry import Quads

#: Probability above which a pixel is text.
DB_THRESHOLD = 0.3
#: Mean probability inside a box below which it is dropped.
BOX_THRESHOLD = 0.5
MAX_CANDIDATES = 1000
#: A box grows by area × ratio / perimeter: the model predicts shrunk text kernels.
UNCLIP_RATIO = 1.6
MIN_BOX_SIDE = 3
#: Boxes whose tops are closer than this (in pixels) are one row when sorting.
ROW_TOLERANCE = 10

#: uint8 value -> normalised float32, exactly as PaddleOCR computes it ((x / 255 - 0.5) /
#: 0.5, in float64 then cast): a table lookup is several times cheaper than the arithmetic.
_SCALED = np.arange(256, dtype=np.float32) * np.float32(1 / 255.0)
_NORMALISED = ((_SCALED.astype(np.float64) - 0.5) / 0.5).astype(np.float32)


def detector_input(bgr: np.ndarray, side_limit: int) -> np.ndarray | None:
    """``bgr`` as the detector takes it: at most ``side_limit`` px on its longest side, both
    sides rounded to a multiple of 32, normalised, shape (1, 3, H, W); None when the page is
    too small to round to 32 px."""
    height, width = bgr.shape[:2]
    ratio = side_limit / max(height, width) if max(height, width) > side_limit else 1.0
    new_height = round(int(height * ratio) / 32) * 32
    new_width = round(int(width * ratio) / 32) * 32
    if new_height <= 0 or new_width <= 0:
        return None
    resized = cv2.resize(bgr, (new_width, new_height))
    return _NORMALISED[resized.transpose(2, 0, 1)][np.newaxis]


def db_quads(prediction: np.ndarray, height: int, width: int) -> Quads:
    """Line quads in pixels of a ``height`` × ``width`` page from the detector's output
    (1, 1, h, w), top-left corner first, clockwise, in reading order of rows."""
    probability = prediction[0, 0]
    mask = cv2.dilate((probability > DB_THRESHOLD).astype(np.uint8), np.ones((2, 2), np.uint8))
    quads = _quads_from_bitmap(probability, mask, width, height)
    return sorted_rows(quads)


def _quads_from_bitmap(
    probability: np.ndarray, bitmap: np.ndarray, dest_width: int, dest_height: int
) -> Quads:
    map_height, map_width = bitmap.shape
    contours, _ = cv2.findContours(bitmap * 255, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    quads = []
    for contour in contours[:MAX_CANDIDATES]:
        points, short_side = _min_area_box(contour)
        if short_side < MIN_BOX_SIDE:
            continue
        if _box_score(probability, points) < BOX_THRESHOLD:
            continue
        grown, short_side = _min_area_box(_unclip(points))
        if short_side < MIN_BOX_SIDE + 2:
            continue
        grown[:, 0] = np.clip(np.round(grown[:, 0] / map_width * dest_width), 0, dest_width)
        grown[:, 1] = np.clip(np.round(grown[:, 1] / map_height * dest_height), 0, dest_height)
        quad = _clockwise(grown.astype(np.int32).astype(np.float32))
        quad[:, 0] = np.minimum(quad[:, 0], dest_width - 1).astype(np.int32)
        quad[:, 1] = np.minimum(quad[:, 1], dest_height - 1).astype(np.int32)
        if min(_side(quad, 1), _side(quad, 3)) <= 3:
            continue
        quads.append(quad)
    return np.array(quads, np.float32).reshape(-1, 4, 2)


def _side(quad: np.ndarray, corner: int) -> int:
    return int(np.linalg.norm(quad[0] - quad[corner]))


def _min_area_box(contour: np.ndarray) -> tuple[np.ndarray, float]:
    """The contour's minimum-area rectangle, corners from the top left, and its short side."""
    rect = cv2.minAreaRect(contour)
    points = sorted(cv2.boxPoints(rect), key=lambda point: point[0])
    left = (0, 1) if points[1][1] > points[0][1] else (1, 0)
    right = (2, 3) if points[3][1] > points[2][1] else (3, 2)
    order = (left[0], right[0], right[1], left[1])
    return np.array([points[i] for i in order]), min(rect[1])


def _box_score(probability: np.ndarray, box: np.ndarray) -> float:
    """Mean text probability inside ``box`` (PaddleOCR's "fast" score)."""
    height, width = probability.shape
    xmin = int(np.clip(np.floor(box[:, 0].min()), 0, width - 1))
    xmax = int(np.clip(np.ceil(box[:, 0].max()), 0, width - 1))
    ymin = int(np.clip(np.floor(box[:, 1].min()), 0, height - 1))
    ymax = int(np.clip(np.ceil(box[:, 1].max()), 0, height - 1))
    mask = np.zeros((ymax - ymin + 1, xmax - xmin + 1), np.uint8)
    shifted = box - np.array([xmin, ymin], box.dtype)
    cv2.fillPoly(mask, shifted.reshape(1, -1, 2).astype(np.int32), 1)
    return float(cv2.mean(probability[ymin : ymax + 1, xmin : xmax + 1], mask)[0])


def _unclip(box: np.ndarray) -> np.ndarray:
    """``box`` grown outwards by area × ``UNCLIP_RATIO`` / perimeter, with round corners."""
    contour = box.astype(np.float32)
    distance = abs(cv2.contourArea(contour)) * UNCLIP_RATIO / cv2.arcLength(contour, True)
    offset = pyclipper.PyclipperOffset()
    offset.AddPath(box, pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    return np.array(offset.Execute(distance)).reshape((-1, 1, 2))


def _clockwise(points: np.ndarray) -> np.ndarray:
    """Top-left, top-right, bottom-right, bottom-left."""
    by_x = points[np.argsort(points[:, 0]), :]
    top_left, bottom_left = by_x[:2][np.argsort(by_x[:2, 1]), :]
    top_right, bottom_right = by_x[2:][np.argsort(by_x[2:, 1]), :]
    return np.array([top_left, top_right, bottom_right, bottom_left], np.float32)


def sorted_rows(quads: Quads) -> Quads:
    """Top to bottom, then left to right within rows of tops closer than ``ROW_TOLERANCE``."""
    if len(quads) == 0:
        return quads
    by_y = quads[np.argsort(quads[:, 0, 1], kind="stable")]
    rows = np.concatenate([[0], np.cumsum(np.diff(by_y[:, 0, 1]) >= ROW_TOLERANCE)])
    return by_y[np.lexsort((by_y[:, 0, 0], rows))]
