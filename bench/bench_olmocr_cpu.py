"""olmOCR-bench tests on the CPU: the embedded engine against Tesseract, with and without
``--drop-headers-footers``, each with ``--text-layer off`` and with the default ``auto``.

Run::

    .venv/bin/python bench/bench_olmocr_cpu.py --olmocr-pdfs OLMOCR/olmocr/bench/sample_data/pdfs
        [--text-layer off --text-layer auto] [--keep DIR] [--json FILE]

For every text-layer mode and every setting (embedded, embedded+drop, tesseract,
tesseract+drop) it converts the test pages with ``ocrflow run`` into a temporary OUT, then
scores that OUT with ``ocrflow eval OUT --tests FILE --json`` and prints one table per mode:
rows are test types and overall, columns the four settings, with pages and wall seconds.

Test sets (pooled in the table, also printed one overall line per set):

- ``sample``: the olmOCR-bench reference sample (``tests/data/olmocr_bench_sample``:
  ``dataset.jsonl`` + ``blanks.jsonl`` + one ``baseline`` test per PDF that has none, as the
  reference's ``benchmark.py`` adds). Its PDFs are not in this repository: pass the sample's
  ``pdfs`` folder of an allenai/olmocr checkout (commit f7cfe4c, see the sample's README)
  with ``--olmocr-pdfs`` or ``$OLMOCR_BENCH_PDFS``; without it the set is skipped;
- ``corpus``: ``tests/data/bench_tests.jsonl`` on ``../shared/corpus``;
- ``examples``: ``bench/quality_tests.jsonl`` on ``examples/`` (the tables that
  ``make bench-quality`` scores).

Then, for each engine, the tests whose verdict ``--drop-headers-footers`` flips are listed;
for a ``present``/``order`` test it lost, the page_header/page_footer blocks of the
undropped run that hold its text are printed, so a body line labelled as a running head
shows up by name.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "data" / "olmocr_bench_sample"
CORPUS = ROOT / ".." / "shared" / "corpus"
TYPES = ("present", "absent", "order", "table", "math", "baseline")
SETTINGS = (("embedded", False), ("embedded", True), ("tesseract", False), ("tesseract", True))
RUNNING = ("page_header", "page_footer")


@dataclass(frozen=True, slots=True)
class TestSet:
    """Tests in the bench format and the files they name (ids prefixed with the set name)."""

    name: str
    tests: tuple[dict[str, Any], ...]
    files: tuple[Path, ...]


def column(engine: str, drop: bool) -> str:
    """Column name of a setting: ``embedded``, ``embedded+drop``, ..."""
    return f"{engine}+drop" if drop else engine


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _test_set(name: str, tests: list[dict[str, Any]], base: Path) -> TestSet:
    # Prefixed ids keep the sets apart once pooled into one tests file.
    tests = [{**t, "id": f"{name}:{t['id']}"} for t in tests]
    files = tuple(base / pdf for pdf in dict.fromkeys(t["pdf"] for t in tests))
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise SystemExit(f"{name}: files not found: {', '.join(missing)}")
    return TestSet(name, tuple(tests), files)


def with_baselines(tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add the reference benchmark's automatic ``baseline`` test to each PDF lacking one."""
    covered = {t["pdf"] for t in tests if t["type"] == "baseline"}
    extra = [
        {"pdf": pdf, "page": 1, "id": f"{pdf}_baseline", "type": "baseline"}
        for pdf in dict.fromkeys(t["pdf"] for t in tests)
        if pdf not in covered
    ]
    return tests + extra


def load_sets(olmocr_pdfs: Path | None) -> list[TestSet]:
    """The three test sets; ``sample`` only when its PDFs are given."""
    sets = []
    if olmocr_pdfs is not None:
        sample = _read_jsonl(SAMPLE / "dataset.jsonl") + _read_jsonl(SAMPLE / "blanks.jsonl")
        sets.append(_test_set("sample", with_baselines(sample), olmocr_pdfs))
    else:
        print("sample skipped: no --olmocr-pdfs / $OLMOCR_BENCH_PDFS", file=sys.stderr)
    sets.append(_test_set("corpus", _read_jsonl(ROOT / "tests/data/bench_tests.jsonl"), CORPUS))
    sets.append(
        _test_set("examples", _read_jsonl(ROOT / "bench/quality_tests.jsonl"), ROOT / "examples")
    )
    return sets


def _ocrflow() -> str:
    # The console script of the interpreter running this file: the checkout's venv.
    script = Path(sys.executable).parent / "ocrflow"
    return str(script) if script.exists() else "ocrflow"


def convert(
    files: Sequence[Path], out: Path, engine: str, text_layer: str, drop: bool
) -> tuple[float, int]:
    """``ocrflow run`` the files into ``out``; wall seconds and pages converted."""
    listing = out.with_suffix(".list")
    listing.write_text("".join(f"{f.resolve()}\n" for f in files), "utf-8")
    cmd = [_ocrflow(), "run", f"@{listing}", "-o", str(out), "--engine", engine]
    cmd += ["--text-layer", text_layer, "--quiet"]
    cmd += ["--drop-headers-footers"] if drop else []
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    # 1 means "some documents failed": scored as missing pages; anything else, or no
    # results at all, is a broken run that must not pass for a poor score.
    if done.returncode not in (0, 1) or not (out / "results").is_dir():
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    pages = sum(rec["metadata"].get("pages_converted", 0) for rec in results(out))
    return seconds, pages


def results(out: Path) -> Iterable[dict[str, Any]]:
    """Every document record of an OUT's ``results/*.jsonl``."""
    for path in sorted((out / "results").glob("*.jsonl")):
        yield from _read_jsonl(path)


def evaluate(out: Path, tests_file: Path) -> list[dict[str, Any]]:
    """Per-test verdicts of ``ocrflow eval OUT --tests FILE --json``."""
    cmd = [_ocrflow(), "eval", str(out), "--tests", str(tests_file), "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["runs"][0]["tests"]


def tally(verdicts: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """(passed, total) per test type and ``overall``."""
    counts: dict[str, list[int]] = {}
    for v in verdicts:
        for key in (v["type"], "overall"):
            c = counts.setdefault(key, [0, 0])
            c[0] += bool(v["passed"])
            c[1] += 1
    return {k: (p, n) for k, (p, n) in counts.items()}


def _cell(score: tuple[int, int] | None) -> str:
    if not score or not score[1]:
        return "–"
    passed, total = score
    return f"{100 * passed / total:.1f} % ({passed}/{total})"


def build_table(
    scores: Mapping[str, Mapping[str, tuple[int, int]]],
    timing: Mapping[str, tuple[float, int]] | None = None,
) -> str:
    """A Markdown table: rows = test types + overall (+ pages, wall), columns = settings."""
    cols = list(scores)
    lines = ["| tests | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for row in (*TYPES, "overall"):
        if any(row in s for s in scores.values()):
            name = f"**{row}**" if row == "overall" else row
            lines.append(
                f"| {name} | " + " | ".join(_cell(scores[c].get(row)) for c in cols) + " |"
            )
    if timing:
        lines.append("| pages | " + " | ".join(str(timing[c][1]) for c in cols) + " |")
        walls = [
            f"{timing[c][0]:.0f} s ({timing[c][0] / max(timing[c][1], 1):.2f} s/page)" for c in cols
        ]
        lines.append("| wall | " + " | ".join(walls) + " |")
    return "\n".join(lines)


def flips(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> dict[str, list[str]]:
    """Test ids whose verdict changed: ``gained`` (fail → pass) and ``lost`` (pass → fail)."""
    was = {v["id"]: bool(v["passed"]) for v in before}
    out: dict[str, list[str]] = {"gained": [], "lost": []}
    for v in after:
        if v["id"] in was and was[v["id"]] != bool(v["passed"]):
            out["gained" if v["passed"] else "lost"].append(v["id"])
    return out


def running_blocks(out: Path) -> dict[tuple[str, int], list[tuple[str, str]]]:
    """(file name, page) → [(label, text)] of the page_header/page_footer blocks of a run."""
    found: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for rec in results(out):
        name = Path(rec["metadata"].get("Source-File") or rec["metadata"]["source_path"]).name
        attrs = rec.get("attributes", {})
        pages = {(s, e): p for s, e, p in attrs.get("pdf_page_numbers", [])}
        for start, end, blocks in attrs.get("page_blocks", []):
            for block in blocks:
                if block[0] in RUNNING:
                    text = " ".join(line[0] for line in block[4])
                    found.setdefault((name, pages.get((start, end), 0)), []).append(
                        (block[0], text)
                    )
    return found


def explain(
    test: Mapping[str, Any], blocks: Mapping[tuple[str, int], list[tuple[str, str]]]
) -> list[str]:
    """The running-head blocks of the test's page that hold (part of) its text."""
    wanted = [test[k] for k in ("text", "before", "after", "cell") if k in test]
    page = blocks.get((Path(test["pdf"]).name, test["page"]), [])
    return [
        f"{label}: {text[:110]!r}"
        for label, text in page
        if any(fuzz.partial_ratio(w, text) >= 80 for w in wanted if min(len(w), len(text)) >= 4)
    ]


def report_flips(
    mode: str,
    runs: Mapping[str, Path],
    verdicts: Mapping[str, list[dict[str, Any]]],
    tests: Mapping[str, dict[str, Any]],
) -> None:
    """Print what ``--drop-headers-footers`` changed per engine, with the lost tests' causes."""
    for engine in ("embedded", "tesseract"):
        if engine not in verdicts or column(engine, True) not in verdicts:
            continue
        change = flips(verdicts[engine], verdicts[column(engine, True)])
        blocks = running_blocks(runs[engine])
        labelled = sum(len(b) for b in blocks.values())
        print(
            f"\n[{mode}] {engine}: {labelled} page_header/page_footer blocks "
            f"on {len(blocks)} pages; drop gained {len(change['gained'])}, "
            f"lost {len(change['lost'])}"
        )
        for kind in ("gained", "lost"):
            for tid in change[kind]:
                t = tests[tid]
                what = t.get("text") or f"{t.get('before', '')!r} < {t.get('after', '')!r}"
                print(f"  {kind} {t['type']:8} {tid}: {str(what)[:90]!r}")
                if kind == "lost":
                    for line in explain(t, blocks) or ["(no running-head block holds the text)"]:
                        print(f"      {line}")


def main(argv: Sequence[str] | None = None) -> int:
    """Convert, evaluate and print the tables; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--olmocr-pdfs", type=Path, default=os.environ.get("OLMOCR_BENCH_PDFS"))
    ap.add_argument("--text-layer", action="append", choices=("off", "auto"))
    ap.add_argument("--keep", type=Path, help="write the OUTs here instead of a temporary folder")
    ap.add_argument("--json", type=Path, help="also write every verdict and timing here")
    args = ap.parse_args(argv)
    sets = load_sets(Path(args.olmocr_pdfs) if args.olmocr_pdfs else None)
    tests = {t["id"]: t for s in sets for t in s.tests}
    files = [f for s in sets for f in s.files]
    counts = ", ".join(f"{s.name} {len(s.tests)}" for s in sets)
    print(f"{len(tests)} tests on {len(files)} files ({counts})")
    dump: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-olmocr-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        tests_file = work / "tests.jsonl"
        tests_file.write_text("".join(json.dumps(t) + "\n" for t in tests.values()), "utf-8")
        for mode in args.text_layer or ["off", "auto"]:
            runs: dict[str, Path] = {}
            verdicts: dict[str, list[dict[str, Any]]] = {}
            timing: dict[str, tuple[float, int]] = {}
            for engine, drop in SETTINGS:
                col = column(engine, drop)
                runs[col] = work / f"{mode}-{col.replace('+', '-')}"
                timing[col] = convert(files, runs[col], engine, mode, drop)
                verdicts[col] = evaluate(runs[col], tests_file)
                print(
                    f"  {mode} {col}: {timing[col][1]} pages in {timing[col][0]:.0f} s", flush=True
                )
            print(f"\n--text-layer {mode}\n")
            print(build_table({c: tally(v) for c, v in verdicts.items()}, timing))
            for s in sets:
                ids = {t["id"] for t in s.tests}
                cells = [
                    _cell(tally(v for v in verdicts[c] if v["id"] in ids).get("overall"))
                    for c in verdicts
                ]
                print(
                    f"  {s.name:9} overall: "
                    + " · ".join(f"{c} {x}" for c, x in zip(verdicts, cells, strict=True))
                )
            report_flips(mode, runs, verdicts, tests)
            dump[mode] = {"timing": timing, "verdicts": verdicts}
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
