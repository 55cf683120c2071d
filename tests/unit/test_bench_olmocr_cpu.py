"""bench/bench_olmocr_cpu.py: its tests file, verdict pooling, table and drop diagnosis.

Scored on the olmOCR-bench reference sample's own candidate folders (``outputs/`` and the
damaged ``perturbed/``), whose verdicts the reference code fixed in reference_verdicts.json.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "olmocr_bench_sample"
_spec = importlib.util.spec_from_file_location(
    "bench_olmocr_cpu", ROOT / "bench" / "bench_olmocr_cpu.py"
)
assert _spec and _spec.loader
bench = importlib.util.module_from_spec(_spec)
# dataclasses look their module up in sys.modules while the class is being built.
sys.modules[_spec.name] = bench
_spec.loader.exec_module(bench)


def _sample_tests() -> list[dict]:
    lines = [
        json.loads(line)
        for name in ("dataset.jsonl", "blanks.jsonl")
        for line in (SAMPLE / name).read_text("utf-8").splitlines()
        if line.strip()
    ]
    return bench.with_baselines(lines)


def test_baselines_are_the_reference_benchmarks() -> None:
    reference = json.loads((SAMPLE / "reference_verdicts.json").read_text("utf-8"))["outputs"]
    tests = _sample_tests()
    # benchmark.py adds one baseline per PDF lacking one: the reference's 120 ids exactly.
    assert sorted(t["id"] for t in tests) == sorted(reference)
    assert sum(t["type"] == "baseline" for t in tests) == 21


def test_tally_table_and_flips_on_the_reference_sample(tmp_path: Path) -> None:
    tests_file = tmp_path / "tests.jsonl"
    tests_file.write_text("".join(json.dumps(t) + "\n" for t in _sample_tests()), "utf-8")
    good = bench.evaluate(SAMPLE / "outputs", tests_file)
    bad = bench.evaluate(SAMPLE / "perturbed", tests_file)
    reference = json.loads((SAMPLE / "reference_verdicts.json").read_text("utf-8"))

    scores = {"olmocr": bench.tally(good), "damaged": bench.tally(bad)}
    assert scores["olmocr"]["overall"] == (107, 120)
    assert scores["damaged"]["overall"] == (87, 120)
    assert sum(n for t, (_, n) in scores["olmocr"].items() if t != "overall") == 120

    table = bench.build_table(scores, {"olmocr": (10.0, 23), "damaged": (46.0, 23)})
    rows = {line.split("|")[1].strip(): line for line in table.splitlines()[2:]}
    assert list(rows) == [*bench.TYPES, "**overall**", "pages", "wall"]
    assert "89.2 % (107/120)" in rows["**overall**"]
    assert "72.5 % (87/120)" in rows["**overall**"]
    assert "2.00 s/page" in rows["wall"]

    change = bench.flips(good, bad)
    expected_lost = {
        i for i, ok in reference["outputs"].items() if ok and not reference["perturbed"][i]
    }
    expected_gained = {
        i for i, ok in reference["outputs"].items() if not ok and reference["perturbed"][i]
    }
    assert set(change["lost"]) == expected_lost
    assert set(change["gained"]) == expected_gained
    assert len(expected_lost) - len(expected_gained) == 20


def test_explain_names_the_running_head_holding_a_lost_line() -> None:
    blocks = {
        ("a.pdf", 2): [
            ("page_footer", "Downloaded from http://example.org/ on 3 May"),
            ("page_header", "Journal of Things 12 (2020)"),
        ]
    }
    lost = {
        "pdf": "pdfs/a.pdf",
        "page": 2,
        "type": "present",
        "text": "Downloaded from http://example.org/",
    }
    assert bench.explain(lost, blocks) == [
        "page_footer: 'Downloaded from http://example.org/ on 3 May'"
    ]
    assert bench.explain({**lost, "page": 1}, blocks) == []
    assert bench.explain({**lost, "text": "A body sentence nowhere in the heads."}, blocks) == []
