"""The PP-OCR line models' input and output: the 0°/180° classifier's and the recogniser's
line images (48 px high, normalised) and the recogniser's CTC decoding.

PaddleOCR's steps with rapidocr's settings, written here for the same reason as
``ppocr_det.py`` (no configuration machinery to load); the recogniser's input is not padded
to PaddleOCR's 320 px minimum width, as ocrflow configured rapidocr before.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np

#: Line height the classifier and the recogniser read.
LINE_HEIGHT = 48
#: The classifier reads every line squeezed or padded to this width.
CLASSIFIER_WIDTH = 192
CLASSIFIER_LABELS = ("0", "180")

#: uint8 value -> normalised float32, as PaddleOCR computes it for the line models
#: ((x / 255 - 0.5) / 0.5 in float32); padding is 0, a mid-grey.
_NORMALISED = ((np.arange(256, dtype=np.float32) / 255 - 0.5) / 0.5).astype(np.float32)


def classifier_input(crops: Sequence[np.ndarray]) -> np.ndarray:
    """``crops`` as one classifier batch, shape (n, 3, 48, 192)."""
    batch = np.zeros((len(crops), 3, LINE_HEIGHT, CLASSIFIER_WIDTH), np.float32)
    for row, crop in enumerate(crops):
        width = min(CLASSIFIER_WIDTH, math.ceil(LINE_HEIGHT * _aspect(crop)))
        resized = cv2.resize(crop, (width, LINE_HEIGHT), interpolation=cv2.INTER_LINEAR)
        batch[row, :, :, :width] = _NORMALISED[resized.transpose(2, 0, 1)]
    return batch


def classifier_labels(probabilities: np.ndarray) -> list[str]:
    """ "0" or "180" for each row of the classifier's output (n, 2)."""
    return [CLASSIFIER_LABELS[int(i)] for i in probabilities.argmax(axis=1)]


def recognizer_input(crops: Sequence[np.ndarray]) -> np.ndarray:
    """``crops`` as one recogniser batch, shape (n, 3, 48, W): each line scaled to 48 px
    high, W that of the widest line (at least 48), narrower lines padded on the right."""
    widest = max(1.0, *(_aspect(crop) for crop in crops))
    batch_width = int(LINE_HEIGHT * widest)
    batch = np.zeros((len(crops), 3, LINE_HEIGHT, batch_width), np.float32)
    for row, crop in enumerate(crops):
        width = min(batch_width, math.ceil(LINE_HEIGHT * _aspect(crop)))
        resized = cv2.resize(crop, (width, LINE_HEIGHT))
        batch[row, :, :, :width] = _NORMALISED[resized.transpose(2, 0, 1)]
    return batch


def _aspect(crop: np.ndarray) -> float:
    return crop.shape[1] / float(crop.shape[0])


class CtcDecoder:
    """Greedy CTC decoding of the recogniser's output with its character list."""

    def __init__(self, characters: Sequence[str]) -> None:
        # Index 0 is CTC's blank; the model's last class is a space.
        self.characters = ("", *characters, " ")

    @property
    def classes(self) -> int:
        """Output classes the recogniser must have."""
        return len(self.characters)

    def decode(self, indices: np.ndarray, probabilities: np.ndarray) -> tuple[str, float]:
        """One line's text and confidence from the best class and its probability at each
        time step: repeats merged, blanks dropped, the confidence the mean probability of the
        kept steps (rounded as PaddleOCR does; 0.0 when nothing is kept)."""
        keep = np.ones(len(indices), bool)
        keep[1:] = indices[1:] != indices[:-1]
        keep &= indices != 0
        text = "".join(self.characters[i] for i in indices[keep])
        kept = [round(p, 5) for p in probabilities[keep].tolist()]
        return text, float(np.round(np.mean(kept), 5)) if kept else 0.0

    def decode_batch(self, best: tuple[np.ndarray, np.ndarray]) -> list[tuple[str, float]]:
        """Every line of a batch from ``best_classes`` of the recogniser's output."""
        return [self.decode(i, p) for i, p in zip(*best, strict=True)]


def best_classes(output: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The best class at each step of the recogniser's output (n, steps, classes) and its
    probability, each (n, steps)."""
    indices = output.argmax(axis=2)
    return indices, np.take_along_axis(output, indices[..., np.newaxis], axis=2)[..., 0]
