"""A recogniser of the embedded engine's lines (``LineModel``), and one page's lines as the
recognisers read them (``PageLines``): each line read once by each model, and read again
by the whole recogniser's head alone where the alphabetic one kept what it read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ocrflow.engines.geometry import line_length
from ocrflow.engines.line_threads import LineThreads
from ocrflow.engines.ppocr_lines import CtcDecoder, best_classes, recognizer_input
from ocrflow.engines.runtime import Session


class LineReading(NamedTuple):
    """A recogniser's reading of one line."""

    text: str
    score: float
    #: What the recogniser's last layer read (steps, features), when it keeps that.
    features: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class LineModel:
    """A recogniser session and the decoder of its output classes."""

    session: Session
    decoder: CtcDecoder
    #: Where a page's lines are read side by side (``line_threads.py``).
    threads: LineThreads = field(default_factory=lambda: LineThreads(1))
    #: Whether the session's second output is what its last layer read (the alphabetic
    #: recogniser's, ``ppocr_charset.reduced_model``), kept with each reading.
    keeps_features: bool = False
    #: This model's last layer alone (``ppocr_charset.head_model``): it reads a line again
    #: from the features a model of the same body kept, for a sixth of a reading.
    head: Session | None = None

    def read(self, lines: list[np.ndarray], batch: int) -> list[LineReading]:
        """Text and confidence of each line, read ``batch`` at a time, narrowest first
        (a batch is padded to its widest line); the lines dealt out in turn among the
        line threads, so each gets as many wide lines as narrow ones."""

        reduces = (best_classes, np.copy) if self.keeps_features else (best_classes,)

        def read_batch(chosen: list[np.ndarray]) -> list[LineReading]:
            best, *kept = self.session.outputs(recognizer_input(chosen), reduces)
            features = kept[0] if kept else [None] * len(chosen)
            read = self.decoder.decode_batch(best)
            return [LineReading(*r, f) for r, f in zip(read, features, strict=True)]

        order = np.argsort([line_length(line) for line in lines], kind="stable")
        return self._shared(lines, order, batch, read_batch)

    def read_again(self, features: list[np.ndarray]) -> list[LineReading]:
        """Text and confidence of lines whose ``features`` another recogniser of the same
        body kept, read by ``head`` one line a call (each has its own steps)."""
        assert self.head is not None
        head = self.head

        def read_one(chosen: list[np.ndarray]) -> list[LineReading]:
            best = head(chosen[0][np.newaxis], best_classes)
            return [LineReading(*read) for read in self.decoder.decode_batch(best)]

        order = np.argsort([len(f) for f in features], kind="stable")
        return self._shared(features, order, 1, read_one)

    def _shared(
        self,
        items: list[np.ndarray],
        order: np.ndarray,
        batch: int,
        read_batch: Callable[[list[np.ndarray]], list[LineReading]],
    ) -> list[LineReading]:
        """``read_batch`` of ``items`` ``batch`` at a time in ``order``, dealt out in turn
        among the line threads; the readings in the items' order."""
        shares = self.threads.shares(len(items))
        parts = [order[k::shares] for k in range(shares)]

        def read_part(part: np.ndarray) -> list[tuple[int, LineReading]]:
            read: list[tuple[int, LineReading]] = []
            for start in range(0, len(part), batch):
                chosen = part[start : start + batch]
                read += zip(chosen, read_batch([items[i] for i in chosen]), strict=True)
            return read

        results: list[LineReading] = [LineReading("", 0.0)] * len(items)
        for part in self.threads.map(read_part, parts):
            for index, result in part:
                results[index] = result
        return results


class PageLines:
    """One page's line crops, as the recogniser reads them (with ``margin``), and what each
    recogniser has read of them so far: no line is read twice by one model (the page's
    orientation check reads its longest lines before the page is read)."""

    def __init__(self, crops: list[np.ndarray], margin: float) -> None:
        self.crops = crops
        self.margin = margin
        self.lines = [_with_margin(c, margin) for c in crops]
        self._readings: dict[tuple[LineModel, int], tuple[str, float]] = {}
        #: What a recogniser that keeps them (``LineModel.keeps_features``) read, by line.
        self._features: dict[int, np.ndarray] = {}

    def turned(self) -> PageLines:
        """The same lines turned 180°, none read yet."""
        return PageLines([turn_half(crop) for crop in self.crops], self.margin)

    def read(self, model: LineModel, chosen: list[int], batch: int) -> dict[int, tuple[str, float]]:
        """``model``'s reading of the ``chosen`` lines, by index; each line is read once,
        by ``model``'s head alone when another recogniser kept what it read."""
        new = [i for i in chosen if (model, i) not in self._readings]
        again = [i for i in new if model.head is not None and i in self._features]
        if again:
            readings = model.read_again([self._features[i] for i in again])
            self._keep(model, again, readings)
        if fresh := [i for i in new if i not in again]:
            self._keep(model, fresh, model.read([self.lines[i] for i in fresh], batch))
        return {i: self._readings[model, i] for i in chosen}

    def forget_features(self) -> None:
        """Let go of the features kept: the page is read."""
        self._features.clear()

    def _keep(self, model: LineModel, chosen: list[int], readings: list[LineReading]) -> None:
        for i, reading in zip(chosen, readings, strict=True):
            self._readings[model, i] = (reading.text, reading.score)
            if reading.features is not None:
                self._features[i] = reading.features


def turn_half(crop: np.ndarray) -> np.ndarray:
    """``crop`` turned 180°."""
    return np.ascontiguousarray(crop[::-1, ::-1])


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
