"""Our olmOCR-bench verdicts equal the reference implementation's on its published samples.

tests/data/olmocr_bench_sample holds the reference's own sample tests and olmOCR outputs,
plus a seeded, damaged copy of those outputs; reference_verdicts.json holds the verdicts
that allenai/olmocr's bench code gave on them (see that folder's README).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocrflow.evaluation.bench import load_tests, parse_test, run_tests
from ocrflow.evaluation.checks import BenchTest
from ocrflow.evaluation.documents import load_run

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "olmocr_bench_sample"
EXPECTED = json.loads((SAMPLE / "reference_verdicts.json").read_text())


def sample_tests() -> list[BenchTest]:
    tests = load_tests(SAMPLE / "dataset.jsonl") + load_tests(SAMPLE / "blanks.jsonl")
    # The reference benchmark adds one baseline test per PDF that has none (benchmark.py).
    for pdf in sorted({t.pdf for t in tests}):
        if not any(t.type == "baseline" and t.pdf == pdf for t in tests):
            tests.append(
                parse_test({"id": f"{pdf}_baseline", "pdf": pdf, "page": 1, "type": "baseline"})
            )
    return tests


@pytest.mark.parametrize("outputs", ["outputs", "perturbed"])
def test_verdicts_equal_the_reference(outputs: str) -> None:
    docs = load_run(str(SAMPLE / outputs))
    pages = {
        (name, page): texts[0] for name, doc in docs.pages.items() for page, texts in doc.items()
    }
    results = run_tests(sample_tests(), pages)
    expected = EXPECTED[outputs]
    assert {r.id for r in results} == set(expected)
    differ = [(r.id, r.passed, r.explanation) for r in results if r.passed != expected[r.id]]
    assert differ == []
    # The sample covers every test type, with passes and failures.
    assert {r.type for r in results} == {"present", "absent", "order", "table", "math", "baseline"}
    assert 0 < sum(r.passed for r in results) < len(results)


def test_the_damaged_outputs_change_verdicts_of_several_types() -> None:
    """The perturbed copy exercises failures the clean outputs do not (fuzzy thresholds,
    reversed paragraphs, HTML tables, \\dfrac): the reference flipped many verdicts there."""
    types = {t.id: t.type for t in sample_tests()}
    flipped = [i for i, ok in EXPECTED["outputs"].items() if ok != EXPECTED["perturbed"][i]]
    assert len(flipped) >= 15
    assert {types[i] for i in flipped} >= {"present", "absent", "order", "math"}
