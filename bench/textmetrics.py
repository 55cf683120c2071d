"""Text accuracy metrics for OCR benchmarks: character error rate and word F1.

Pure functions, no ocrflow imports, so benchmarks and tests can share them. Both engines'
outputs must go through the same ``normalize_text`` before they are compared.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

import numpy as np

_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class WordScores:
    """Bag-of-words precision, recall and F1 of a hypothesis against a reference."""

    precision: float
    recall: float
    f1: float


def normalize_text(text: str) -> str:
    """NFKC-normalise (ligatures such as "ﬁ" become "fi") and collapse all whitespace.

    Line and paragraph breaks are layout, not content: CER must not punish an engine for
    joining lines differently, so every run of whitespace becomes one space.
    """
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip()


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance between ``a`` and ``b`` (unit costs).

    Row by row with numpy: the insertion chain ``row[j] = min(row[j], row[j-1] + 1)`` is a
    running minimum of ``row[k] - k`` plus ``j``, so each row is a few vector operations.
    """
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return len(a)
    codes_b = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    index = np.arange(len(b) + 1)
    row = index.copy()
    for char in a:
        cost = (codes_b != ord(char)).astype(np.int64)
        best = np.empty_like(row)
        best[0] = row[0] + 1
        best[1:] = np.minimum(row[1:] + 1, row[:-1] + cost)
        row = np.minimum.accumulate(best - index) + index
    return int(row[-1])


def cer(hypothesis: str, reference: str) -> float:
    """Character error rate: edit distance over the reference length, after normalising.

    An empty reference gives 0.0 for an empty hypothesis and 1.0 otherwise. CER can exceed
    1.0 when the hypothesis is much longer than the reference.
    """
    hyp, ref = normalize_text(hypothesis), normalize_text(reference)
    if not ref:
        return 0.0 if not hyp else 1.0
    return edit_distance(hyp, ref) / len(ref)


def word_scores(hypothesis: str, reference: str) -> WordScores:
    """Bag-of-words precision, recall and F1 (order-free, multiset counts), after normalising."""
    hyp = Counter(normalize_text(hypothesis).split())
    ref = Counter(normalize_text(reference).split())
    if not hyp and not ref:
        return WordScores(1.0, 1.0, 1.0)
    matched = sum((hyp & ref).values())
    precision = matched / sum(hyp.values()) if hyp else 0.0
    recall = matched / sum(ref.values()) if ref else 0.0
    total = precision + recall
    return WordScores(precision, recall, 2 * precision * recall / total if total else 0.0)


def word_f1(hypothesis: str, reference: str) -> float:
    """Bag-of-words F1 of ``hypothesis`` against ``reference``."""
    return word_scores(hypothesis, reference).f1
