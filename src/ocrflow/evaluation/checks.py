"""The olmOCR-bench test types, each a frozen dataclass with ``check(markdown)``.

Semantics follow the reference (olmocr/bench/tests.py): texts are normalised with
:func:`normalize_text`; ``present``/``absent`` compare ``partial_ratio`` with the threshold
``1 - max_diffs / len(text)``; ``order`` finds both texts within ``max_diffs`` edits and
needs one ``before`` occurrence to start before one ``after`` occurrence; ``table`` looks
for a cell (``ratio`` >= max(0.5, threshold)) whose neighbours match; ``math`` looks for
the formula among the page's delimited formulas; ``baseline`` checks that a page is not
blank (or is, with ``max_length``), does not end in a loop and has no CJK/emoji characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ocrflow.evaluation.fuzzy import find_near_matches, partial_ratio, ratio
from ocrflow.evaluation.mathtex import extract_formulas, same_formula
from ocrflow.evaluation.normalize import normalize_text
from ocrflow.evaluation.tables import Cell, Table, parse_tables

Verdict = tuple[bool, str]

_DISALLOWED = re.compile(
    "[\u4e00-\u9fff\u3040-\u309f\u30a0-\u30ff"
    "\U0001f600-\U0001f64f\U0001f300-\U0001f5ff\U0001f680-\U0001f6ff\U0001f1e0-\U0001f1ff]"
)


def threshold(max_diffs: int, text: str) -> float:
    """Similarity a match needs: ``1 - max_diffs / len(text)``."""
    return 1.0 - max_diffs / (len(text) or 1)


@dataclass(frozen=True, kw_only=True)
class BenchTest:
    """Fields every test has; ``page`` is 1-based."""

    id: str
    pdf: str
    page: int
    type: str
    max_diffs: int = 0

    def check(self, content: str) -> Verdict:
        """Return (passed, explanation) for one page's Markdown."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class PresenceTest(BenchTest):
    """``present``/``absent``: a text is (not) in the page, within ``max_diffs``."""

    text: str
    case_sensitive: bool = True
    first_n: int | None = None
    last_n: int | None = None

    def check(self, content: str) -> Verdict:
        query, content = self.text, normalize_text(content)
        if not self.case_sensitive:
            query, content = query.lower(), content.lower()
        if self.first_n and self.last_n:
            content = content[: self.first_n] + content[-self.last_n :]
        elif self.first_n:
            content = content[: self.first_n]
        elif self.last_n:
            content = content[-self.last_n :]
        need, best = threshold(self.max_diffs, query), partial_ratio(query, content)
        found = best >= need
        if found == (self.type == "present"):
            return True, ""
        verb = "Expected" if self.type == "present" else "Expected absence of"
        return False, f"{verb} '{query[:40]}...' (threshold {need:.3f}, best match {best:.3f})"


@dataclass(frozen=True, kw_only=True)
class OrderTest(BenchTest):
    """``order``: ``before`` occurs before ``after``."""

    before: str
    after: str

    def check(self, content: str) -> Verdict:
        content = normalize_text(content)
        befores = find_near_matches(self.before, content, self.max_diffs)
        if not befores:
            return False, f"'before' text '{self.before[:40]}...' not found"
        afters = find_near_matches(self.after, content, self.max_diffs)
        if not afters:
            return False, f"'after' text '{self.after[:40]}...' not found"
        if min(m.start for m in befores) < max(m.start for m in afters):
            return True, ""
        return False, f"'{self.before[:40]}...' does not appear before '{self.after[:40]}...'"


@dataclass(frozen=True, kw_only=True)
class TableTest(BenchTest):
    """``table``: a cell whose neighbours (and headings) hold the given texts."""

    cell: str
    up: str = ""
    down: str = ""
    left: str = ""
    right: str = ""
    top_heading: str = ""
    left_heading: str = ""
    ignore_markdown_tables: bool = False

    def _relations(self, table: Table) -> list[tuple[str, Callable[[Cell], set[Cell]]]]:
        pairs: list[tuple[str, Callable[[Cell], set[Cell]]]] = [
            (self.up, lambda c: table.up[c]),
            (self.down, lambda c: table.down[c]),
            (self.left, lambda c: table.left[c]),
            (self.right, lambda c: table.right[c]),
            (self.left_heading, table.left_headings),
            (self.top_heading, table.top_headings),
        ]
        return [(want, rel) for want, rel in pairs if want]

    def _neighbour_fails(self, table: Table, cell: Cell) -> list[str]:
        fails = []
        for want, relation in self._relations(table):
            need = max(0.5, threshold(self.max_diffs, want))
            scores = [ratio(want, normalize_text(table.cells[o])) for o in relation(cell)]
            if not any(s >= need for s in scores):
                fails.append(f"no neighbour matches '{want}' (best {max(scores, default=0):.2f})")
        return fails

    def check(self, content: str) -> Verdict:
        tables = parse_tables(content, markdown=not self.ignore_markdown_tables)
        if not tables:
            return False, "No tables found in the content"
        need, reasons = max(0.5, threshold(self.max_diffs, self.cell)), []
        for table in tables:
            for cell, text in table.cells.items():
                if ratio(self.cell, normalize_text(text)) < need:
                    continue
                fails = self._neighbour_fails(table, cell)
                if not fails:
                    return True, ""
                reasons.extend(fails)
        if not reasons:
            return False, f"No cell matching '{self.cell}' in any table"
        return False, f"Cells match '{self.cell}' but not their neighbours: {'; '.join(reasons)}"


@dataclass(frozen=True, kw_only=True)
class MathTest(BenchTest):
    """``math``: the LaTeX formula appears among the page's delimited formulas."""

    math: str
    ignore_dollar_delimited: bool = False

    def check(self, content: str) -> Verdict:
        formulas = extract_formulas(content, dollars=not self.ignore_dollar_delimited)
        if any(f == self.math or same_formula(self.math, f) for f in formulas):
            return True, ""
        return False, f"No match found for {self.math} anywhere in content"


@dataclass(frozen=True, kw_only=True)
class BaselineTest(BenchTest):
    """``baseline``: not blank, not looping at the end, no CJK/emoji; or blank enough."""

    max_length: int | None = None
    max_length_skips_image_alt_tags: bool = False
    max_repeats: int = 30
    check_disallowed_characters: bool = True

    def check(self, content: str) -> Verdict:
        if self.max_length is not None:
            counted = content
            if self.max_length_skips_image_alt_tags:
                counted = re.sub(r"!\[.*?\]\(.*?\)", "", content)
            length = sum(c.isalnum() for c in counted)
            if length > self.max_length:
                return False, f"{length} characters were output for a page expected to be blank"
            return True, ""
        if not any(c.isalnum() for c in content):
            return False, "The text contains no alpha numeric characters"
        for size, count in enumerate(trailing_repeats(content), start=1):
            if count > self.max_repeats:
                return False, f"Text ends with {count} repeating {size}-grams"
        if self.check_disallowed_characters and (bad := _DISALLOWED.findall(content)):
            return False, f"Text contains disallowed characters {bad[:10]}"
        return True, ""


def trailing_repeats(text: str, max_size: int = 5) -> list[int]:
    """For n = 1..max_size: how many times the last n characters repeat back to back."""
    text = re.sub(r"\s+", " ", text)
    counts = []
    for size in range(1, max_size + 1):
        if len(text) < size:
            counts.append(0)
            continue
        tail, count, pos = text[-size:], 0, len(text) - size
        while pos >= 0 and text[pos : pos + size] == tail:
            count, pos = count + 1, pos - size
        counts.append(count)
    return counts
