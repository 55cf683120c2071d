"""Text normalisation of the olmOCR-bench reference, so that our verdicts equal theirs.

Rules (olmocr/bench/tests.py ``normalize_text``, re-implemented): ``<br>`` becomes a space,
Markdown bold/italic markers and ``<b>``/``<i>`` tags are dropped, whitespace runs become
one space, Unicode NFC, and typographic quotes, dashes, the full-width low line and the
micro sign fold to their ASCII (or Greek mu) forms.
"""

from __future__ import annotations

import re
import unicodedata

_FOLDS: dict[str, str] = {
    "\u2018": "'",
    "\u2019": "'",
    "\u201a": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u201e": '"',
    "\uff3f": "_",
    "\u2013": "-",
    "\u2014": "-",
    "\u2011": "-",
    "\u2012": "-",
    "\u2212": "-",
    "\u00b5": "\u03bc",
}
_FOLD_TABLE = str.maketrans(_FOLDS)


def normalize_text(text: str) -> str:
    """Normalise Markdown text the way the reference benchmark does before matching."""
    text = re.sub(r"<br/?>", " ", text)
    # The reference removes emphasis in this order; the order matters for nested markers.
    text = re.sub(r"\*\*(.*?)\*\*", r"\1", text)
    text = re.sub(r"__(.*?)__", r"\1", text)
    text = re.sub(r"</?b>", "", text)
    text = re.sub(r"</?i>", "", text)
    text = re.sub(r"(\*\*|__)(.*?)\1", r"\2", text)
    text = re.sub(r"(\*|_)(.*?)\1", r"\2", text)
    text = re.sub(r"\s+", " ", text)
    text = unicodedata.normalize("NFC", text)
    return text.translate(_FOLD_TABLE)
