"""CER and word F1 of bench/textmetrics.py, against a plain dynamic-programming reference."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "textmetrics.py"
_SPEC = importlib.util.spec_from_file_location("bench_textmetrics", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
textmetrics = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = textmetrics  # dataclasses look their module up there
_SPEC.loader.exec_module(textmetrics)


def reference_distance(a: str, b: str) -> int:
    """Textbook Levenshtein distance."""
    row = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, char_b in enumerate(b, 1):
            previous, row[j] = (
                row[j],
                min(row[j] + 1, row[j - 1] + 1, previous + (char_a != char_b)),
            )
    return row[-1]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [("kitten", "sitting", 3), ("", "abc", 3), ("abc", "", 3), ("flaw", "lawn", 2), ("ä", "ä", 0)],
)
def test_edit_distance_known_pairs(a: str, b: str, expected: int) -> None:
    assert textmetrics.edit_distance(a, b) == expected


def test_edit_distance_matches_reference_on_random_strings() -> None:
    rng = random.Random(7)
    for _ in range(200):
        a = "".join(rng.choice("abcé ") for _ in range(rng.randint(0, 30)))
        b = "".join(rng.choice("abcé ") for _ in range(rng.randint(0, 30)))
        assert textmetrics.edit_distance(a, b) == reference_distance(a, b)


def test_cer_ignores_layout_whitespace_and_ligatures() -> None:
    assert textmetrics.cer("the ﬁrst\n\nline  two", "the first line two") == 0.0


def test_cer_counts_errors_over_reference_length() -> None:
    assert textmetrics.cer("abXd", "abcd") == pytest.approx(0.25)
    assert textmetrics.cer("", "abcd") == 1.0
    assert textmetrics.cer("", "") == 0.0
    assert textmetrics.cer("x", " ") == 1.0


def test_word_scores_are_order_free_multiset_counts() -> None:
    scores = textmetrics.word_scores("b a a x", "a b a c")
    assert scores.precision == pytest.approx(0.75)
    assert scores.recall == pytest.approx(0.75)
    assert textmetrics.word_f1("b a a x", "a b a c") == pytest.approx(0.75)


def test_word_f1_edge_cases() -> None:
    assert textmetrics.word_f1("", "") == 1.0
    assert textmetrics.word_f1("", "words") == 0.0
    assert textmetrics.word_f1("no overlap", "at all") == 0.0
