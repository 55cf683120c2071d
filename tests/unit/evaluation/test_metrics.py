"""CER and word F1 of ocrflow.evaluation.metrics, against a plain dynamic-programming
Levenshtein written here."""

from __future__ import annotations

import random

import pytest

from ocrflow.evaluation.metrics import (
    aggregate_scores,
    cer,
    normalize_for_metrics,
    score_text,
    word_f1,
)


def dp_distance(a: str, b: str) -> int:
    """Textbook Levenshtein distance, one row at a time."""
    row = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        diagonal, row[0] = row[0], i
        for j, char_b in enumerate(b, 1):
            diagonal, row[j] = (
                row[j],
                min(row[j] + 1, row[j - 1] + 1, diagonal + (char_a != char_b)),
            )
    return row[-1]


@pytest.mark.parametrize("seed", range(40))
def test_cer_is_the_levenshtein_distance_over_the_reference_length(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "abcde fgäß\n"
    ref = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))
    hyp = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
    ref_n, hyp_n = normalize_for_metrics(ref), normalize_for_metrics(hyp)
    if not ref_n:
        return
    assert cer(ref, hyp) == pytest.approx(dp_distance(ref_n, hyp_n) / len(ref_n))
    assert cer(ref, hyp, normalize=False) == pytest.approx(dp_distance(ref, hyp) / len(ref))


def test_cer_is_order_sensitive_and_word_f1_is_not() -> None:
    ref = "The footer line. Body text of the page follows here."
    moved = "Body text of the page follows here. The footer line."
    assert word_f1(ref, moved) == 1.0
    assert cer(ref, moved) > 0.5


def test_markdown_and_typography_are_not_errors() -> None:
    ref = "Title\nIt's a “quoted” text – with a dash and the ﬁne ligature."
    hyp = '# Title\n\nIt’s a **"quoted"** text - with a dash and the fine ligature.<br>'
    assert cer(ref, hyp) == 0.0
    assert word_f1(ref, hyp) == 1.0


def test_word_f1_counts_multisets() -> None:
    scores = score_text("a a b c", "a b b d")
    assert (scores.matched_words, scores.ref_words, scores.hyp_words) == (2, 4, 4)
    assert scores.word_f1 == pytest.approx(0.5)
    assert word_f1("", "") == 1.0 and word_f1("a", "") == 0.0


def test_empty_reference() -> None:
    assert cer("", "") == 0.0
    assert cer("", "x") == 1.0


def test_aggregate_is_a_micro_average() -> None:
    short, long = score_text("ab", "xb"), score_text("a" * 98, "a" * 98)
    total = aggregate_scores([short, long])
    assert total.cer == pytest.approx(1 / 100)
    assert total.edits == 1 and total.ref_chars == 100
