"""``ocrflow eval`` on real runs of ``ocrflow run``: bench tests by PDF name and page,
CER / word F1 against ground-truth files (checked with a plain Levenshtein here), and two
runs side by side."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ocrflow.evaluation.metrics import normalize_for_metrics
from tests.integration.cli_helpers import ocrflow, results
from tests.unit.evaluation.test_metrics import dp_distance

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TESTS = [
    {
        "pdf": "docs/born-digital.pdf",
        "page": 1,
        "id": "p1-title",
        "type": "present",
        "text": "Quarterly Report on Library Digitisation",
    },
    {
        "pdf": "born-digital.pdf",
        "page": 2,
        "id": "p2-german",
        "type": "present",
        "text": "Schone Grusse aus dem Archiv",
        "max_diffs": 4,
    },
    {
        "pdf": "born-digital.pdf",
        "page": 1,
        "id": "p1-order",
        "type": "order",
        "before": "The reading room received",
        "after": "Costs fell by twelve percent",
    },
    {
        "pdf": "born-digital.pdf",
        "page": 1,
        "id": "p1-order-wrong",
        "type": "order",
        "before": "Costs fell by twelve percent",
        "after": "The reading room received",
    },
    {
        "pdf": "born-digital.pdf",
        "page": 3,
        "id": "p3-absent",
        "type": "absent",
        "text": "Quarterly Report",
    },
    {
        "pdf": "born-digital.pdf",
        "page": 3,
        "id": "p3-total",
        "type": "present",
        "text": "Total due 535.00",
    },
    {"pdf": "born-digital.pdf", "page": 3, "id": "p3-baseline", "type": "baseline"},
    {"pdf": "missing.pdf", "page": 1, "id": "no-such-doc", "type": "present", "text": "x"},
]
pytestmark = pytest.mark.slow  # two real runs and several ocrflow processes: ~20 s

TRUTH = (
    "# Quarterly Report on Library Digitisation\n\nThe reading room received four hundred "
    "boxes of letters, invoices and contracts in March."
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two real runs of the born-digital sample: all pages, and page 1 only."""
    base = tmp_path_factory.mktemp("eval")
    src = base / "docs"
    src.mkdir()
    shutil.copy(EXAMPLES / "born-digital.pdf", src / "born-digital.pdf")
    out = {"all": base / "all", "first": base / "first"}
    for name, extra in (("all", []), ("first", ["--pages", "1"])):
        done = ocrflow("run", str(src), "-o", str(out[name]), "-q", *extra, timeout=300)
        assert done.returncode == 0, done.stderr
    (base / "tests.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TESTS))
    truth = base / "truth"
    truth.mkdir()
    (truth / "born-digital.md").write_text(TRUTH)
    (truth / "born-digital.json").write_text("{}")  # not text: never picked
    return {**out, "tests": base / "tests.jsonl", "truth": truth}


def test_eval_json_gives_per_test_verdicts_and_rates(runs: dict[str, Path]) -> None:
    done = ocrflow("eval", str(runs["all"]), "--tests", str(runs["tests"]), "--json")
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    verdicts = {t["id"]: t["passed"] for t in run["tests"]}
    assert verdicts == {
        "p1-title": True,
        "p2-german": True,
        "p1-order": True,
        "p1-order-wrong": False,
        "p3-absent": True,
        "p3-total": True,
        "p3-baseline": True,
        "no-such-doc": False,
    }
    assert run["pass_rates"]["overall"] == {"passed": 6, "total": 8, "rate": 0.75}
    assert run["pass_rates"]["order"]["passed"] == 1
    missing = next(t for t in run["tests"] if t["id"] == "no-such-doc")
    assert missing["explanation"] == "missing page"
    assert run["truth"] is None


def test_truth_cer_matches_an_independent_levenshtein(runs: dict[str, Path]) -> None:
    done = ocrflow("eval", str(runs["all"]), "--truth", str(runs["truth"]), "--json")
    assert done.returncode == 0, done.stderr
    (doc,) = json.loads(done.stdout)["runs"][0]["truth"]["documents"]
    assert (doc["document"], doc["truth"]) == ("born-digital.pdf", "born-digital.md")
    (record,) = results(runs["all"])
    ref, hyp = normalize_for_metrics(TRUTH), normalize_for_metrics(record["text"])
    assert doc["edits"] == dp_distance(ref, hyp)
    assert doc["cer"] == pytest.approx(dp_distance(ref, hyp) / len(ref))
    assert doc["word_recall"] == 1.0 and 0 < doc["word_precision"] < 0.5


def test_compare_puts_runs_side_by_side(runs: dict[str, Path]) -> None:
    done = ocrflow(
        "eval",
        str(runs["all"]),
        "--compare",
        str(runs["first"]),
        "--tests",
        str(runs["tests"]),
        "--truth",
        str(runs["truth"]),
    )
    assert done.returncode == 0, done.stderr
    overall = next(ln for ln in done.stdout.splitlines() if "overall" in ln and "/8" in ln)
    assert "75.0% (6/8)" in overall and "25.0% (2/8)" in overall  # pages 2, 3 missing
    assert "born-digital.pdf" in done.stdout and "CER" in done.stdout


def test_usage_errors(runs: dict[str, Path], tmp_path: Path) -> None:
    assert ocrflow("eval", str(runs["all"])).returncode == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"pdf": "a.pdf", "page": 1, "id": "x", "type": "nonsense"}\n')
    done = ocrflow("eval", str(runs["all"]), "--tests", str(bad))
    assert done.returncode == 2 and "bad.jsonl:1" in done.stderr
    done = ocrflow("eval", str(tmp_path), "--tests", str(runs["tests"]))
    assert done.returncode == 2 and "no documents" in done.stderr
