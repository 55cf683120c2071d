"""Load olmOCR-bench test files and run them against page texts.

A test file is JSONL, one test a line: ``{"pdf": "a.pdf", "page": 1, "id": "a_01",
"type": "present", "text": "..."}``. :func:`run_tests` takes the page texts as a mapping
``(pdf, page) -> markdown`` and returns one :class:`TestResult` per test; a page that is
missing fails its tests with the explanation ``missing page``.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocrflow.errors import ConfigError
from ocrflow.evaluation.checks import (
    BaselineTest,
    BenchTest,
    MathTest,
    OrderTest,
    PresenceTest,
    TableTest,
)
from ocrflow.evaluation.normalize import normalize_text

TEST_TYPES: dict[str, type[BenchTest]] = {
    "present": PresenceTest,
    "absent": PresenceTest,
    "order": OrderTest,
    "table": TableTest,
    "math": MathTest,
    "baseline": BaselineTest,
}
_NORMALISED = (
    "text",
    "before",
    "after",
    "cell",
    "up",
    "down",
    "left",
    "right",
    "top_heading",
    "left_heading",
)
_REQUIRED = {
    "present": ("text",),
    "absent": ("text",),
    "order": ("before", "after"),
    "table": ("cell",),
    "math": ("math",),
    "baseline": (),
}


@dataclass(frozen=True)
class TestResult:
    """The verdict of one test on one page."""

    __test__ = False  # not a pytest class

    id: str
    type: str
    pdf: str
    page: int
    passed: bool
    explanation: str


@dataclass(frozen=True)
class PassRate:
    """Passed / total for one group of tests."""

    passed: int
    total: int

    @property
    def rate(self) -> float:
        """Fraction passed (0.0 for an empty group)."""
        return self.passed / self.total if self.total else 0.0


def _validate(data: dict[str, Any]) -> None:
    kind = data.get("type")
    if kind not in TEST_TYPES:
        raise ValueError(f"unknown test type {kind!r}")
    for key in ("id", "pdf"):
        if not data.get(key):
            raise ValueError(f"'{key}' is empty")
    max_diffs = data.get("max_diffs", 0)
    if not isinstance(max_diffs, int) or isinstance(max_diffs, bool) or max_diffs < 0:
        raise ValueError("'max_diffs' must be an integer >= 0")
    for key in _REQUIRED[kind]:
        if not str(data.get(key) or "").strip():
            raise ValueError(f"'{key}' is empty")
    if kind == "order" and max_diffs > min(len(data["before"]), len(data["after"])) // 2:
        raise ValueError("'max_diffs' is more than half of 'before' or 'after'")


def parse_test(data: dict[str, Any]) -> BenchTest:
    """One test from its JSON object; texts are normalised; raises ValueError if invalid."""
    data = dict(data)
    for key in _NORMALISED:
        if isinstance(data.get(key), str):
            data[key] = normalize_text(data[key])
    _validate(data)
    cls = TEST_TYPES[data["type"]]
    known = {f.name for f in dataclasses.fields(cls)}
    # Fields of other bench versions (checked, url, …) are ignored rather than refused.
    return cls(**{k: v for k, v in data.items() if k in known})


def load_tests(path: Path | str) -> list[BenchTest]:
    """Tests of a JSONL file; raises ConfigError naming the line of a bad or duplicate test."""
    tests: list[BenchTest] = []
    seen: set[str] = set()
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            test = parse_test(json.loads(line))
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{path}:{number}: {exc}") from exc
        if test.id in seen:
            raise ConfigError(f"{path}:{number}: duplicate test id {test.id!r}")
        seen.add(test.id)
        tests.append(test)
    return tests


def run_test(test: BenchTest, content: str | None) -> TestResult:
    """Run one test on one page's Markdown (``None``: the page is missing)."""
    if content is None:
        passed, why = False, "missing page"
    else:
        passed, why = test.check(content)
    return TestResult(test.id, test.type, test.pdf, test.page, passed, why)


def run_tests(
    tests: Iterable[BenchTest], pages_text: Mapping[tuple[str, int], str]
) -> list[TestResult]:
    """Run every test against ``pages_text[(test.pdf, test.page)]``."""
    return [run_test(t, pages_text.get((t.pdf, t.page))) for t in tests]


def pass_rates(results: Iterable[TestResult]) -> dict[str, PassRate]:
    """Pass rate per test type, plus ``"overall"``."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for result in results:
        for key in (result.type, "overall"):
            counts[key][0] += result.passed
            counts[key][1] += 1
    return {key: PassRate(*counts[key]) for key in sorted(counts, key=lambda k: k == "overall")}
