"""Text-similarity metrics against plain-text ground truth: CER and word F1.

Both compare *normalised* text (see :func:`normalize_for_metrics`) so that Markdown markup,
line breaks and typographic quotes do not count as OCR errors. CER is order-sensitive (a
page footer that lands mid-text costs its length twice); word F1 is a bag-of-words measure
that ignores order. Reporting both tells reading-order mistakes apart from recognition
mistakes.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from rapidfuzz.distance import Levenshtein

from ocrflow.evaluation.normalize import normalize_text

# Markdown syntax that a plain-text ground truth never has: headings, list bullets, table
# pipes and rules, emphasis markers, HTML tags, image links and page-separator comments.
_MD_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"<!--.*?-->", " "),
    (r"!\[[^\]]*\]\([^)]*\)", " "),
    (r"\[([^\]]*)\]\([^)]*\)", r"\1"),
    (r"<[^>\n]{1,200}>", " "),
    (r"(?m)^\s{0,3}#{1,6}\s+", ""),
    (r"(?m)^\s*(?:[-*+]|\d+[.)])\s+", ""),
    (r"(?m)^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$", " "),
    (r"\|", " "),
    (r"`+", ""),
)


@dataclass(frozen=True)
class TextScores:
    """Scores of one hypothesis against one reference."""

    cer: float
    """Character edit distance / reference length (can exceed 1 when the output is longer)."""
    edits: int
    """Levenshtein distance between the normalised texts."""
    ref_chars: int
    word_precision: float
    word_recall: float
    word_f1: float
    ref_words: int
    hyp_words: int
    matched_words: int


def strip_markdown(text: str) -> str:
    """Remove Markdown/HTML markup so that only the words remain."""
    for pattern, repl in _MD_PATTERNS:
        text = re.sub(pattern, repl, text, flags=re.DOTALL)
    return text


def normalize_for_metrics(text: str, *, markdown: bool = True, case_sensitive: bool = True) -> str:
    """Normalise text for CER/word F1: markup removed, quotes/dashes folded, one space runs.

    The character folding is the reference benchmark's (:func:`normalize_text`), so a metric
    and a bench test see the same text, plus NFKC so that ligatures (``ﬁ``) and full-width
    forms count as the letters they are.
    """
    if markdown:
        text = strip_markdown(text)
    text = normalize_text(unicodedata.normalize("NFKC", text)).strip()
    return text if case_sensitive else text.lower()


def levenshtein(a: str, b: str) -> int:
    """Plain character Levenshtein distance (insertions, deletions, substitutions cost 1)."""
    return int(Levenshtein.distance(a, b))


def cer(reference: str, hypothesis: str, *, normalize: bool = True) -> float:
    """Character error rate: edits / reference characters, on normalised text by default.

    An empty reference gives 0.0 for an empty hypothesis and 1.0 otherwise.
    """
    if normalize:
        reference = normalize_for_metrics(reference)
        hypothesis = normalize_for_metrics(hypothesis)
    if not reference:
        return 0.0 if not hypothesis else 1.0
    return levenshtein(reference, hypothesis) / len(reference)


def words(text: str) -> list[str]:
    """Word tokens for word F1: runs of letters/digits, punctuation dropped, lower-cased."""
    return re.findall(r"\w+", text.lower())


def word_counts_f1(ref: Counter[str], hyp: Counter[str]) -> tuple[float, float, float, int]:
    """Precision, recall, F1 and matched count of two word multisets."""
    matched = sum((ref & hyp).values())
    n_ref, n_hyp = sum(ref.values()), sum(hyp.values())
    precision = matched / n_hyp if n_hyp else (1.0 if not n_ref else 0.0)
    recall = matched / n_ref if n_ref else (1.0 if not n_hyp else 0.0)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, matched


def word_f1(reference: str, hypothesis: str, *, normalize: bool = True) -> float:
    """Bag-of-words F1 (multiset overlap of word tokens); order does not matter."""
    if normalize:
        reference = normalize_for_metrics(reference)
        hypothesis = normalize_for_metrics(hypothesis)
    return word_counts_f1(Counter(words(reference)), Counter(words(hypothesis)))[2]


def score_text(reference: str, hypothesis: str) -> TextScores:
    """CER and word precision/recall/F1 of one hypothesis, on normalised text."""
    ref = normalize_for_metrics(reference)
    hyp = normalize_for_metrics(hypothesis)
    edits = levenshtein(ref, hyp)
    ref_w, hyp_w = Counter(words(ref)), Counter(words(hyp))
    precision, recall, f1, matched = word_counts_f1(ref_w, hyp_w)
    return TextScores(
        cer=edits / len(ref) if ref else (0.0 if not hyp else 1.0),
        edits=edits,
        ref_chars=len(ref),
        word_precision=precision,
        word_recall=recall,
        word_f1=f1,
        ref_words=sum(ref_w.values()),
        hyp_words=sum(hyp_w.values()),
        matched_words=matched,
    )


def aggregate_scores(scores: list[TextScores]) -> TextScores:
    """Micro-average: total edits / total reference characters, pooled word counts."""
    edits = sum(s.edits for s in scores)
    ref_chars = sum(s.ref_chars for s in scores)
    ref_words = sum(s.ref_words for s in scores)
    hyp_words = sum(s.hyp_words for s in scores)
    matched = sum(s.matched_words for s in scores)
    precision = matched / hyp_words if hyp_words else 0.0
    recall = matched / ref_words if ref_words else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return TextScores(
        cer=edits / ref_chars if ref_chars else 0.0,
        edits=edits,
        ref_chars=ref_chars,
        word_precision=precision,
        word_recall=recall,
        word_f1=f1,
        ref_words=ref_words,
        hyp_words=hyp_words,
        matched_words=matched,
    )
