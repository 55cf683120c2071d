"""Per-page confidence end to end: a run on the fake VLM server with garbage, repetition
and length faults, with ``--logprobs``. The pages that met a fault score lowest; ``ocrflow
status`` spreads the pages across confidence; ``ocrflow review --only low-confidence``
lists the worst first; the JSONL record and the Parquet row carry each page's value."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.fakevllm.process import running_server

from .cli_helpers import ocrflow, results, status_json
from .vlm_helpers import MODEL, done_records, rendered_tags, vlm_args

DOCUMENT = "unstructured__DA-619p.pdf"
PAGES = 30
#: The fake server's faults: ``length`` (a repetition loop cut at max_tokens) and
#: ``garbage`` (noise or a "the the the" loop ending with ``stop``). No transport faults,
#: so a page sent more than once met a content fault.
FAULTS = ("--length", "0.12", "--garbage", "0.12")


@dataclass
class Run:
    out: Path
    stats: dict[str, Any]
    tags: dict[int, str]
    records: list[dict[str, Any]]


@pytest.fixture(scope="module")
def run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("confidence") / "out"
    pdf = corpus / "pdfs" / DOCUMENT
    flags = ("--reply-format", "olmocr", "--model", MODEL, "--pages-per-s", "200", "--seed", "3")
    with running_server(*flags, *FAULTS) as server:
        done = ocrflow(
            "run", str(pdf), "-o", str(out), "--pages", f"1-{PAGES}",
            "--format", "markdown,jsonl,parquet",
            *vlm_args(server.base_url, "--logprobs"),
            timeout=300,
        )  # fmt: skip
        stats = server.stats()
    assert done.returncode == 0, done.stderr[-2000:]
    tags = rendered_tags(pdf, tuple(range(1, PAGES + 1)))
    return Run(out, stats, tags, results(out))


def _confidences(run: Run) -> dict[int, float]:
    """Each page's confidence from the JSONL record: ``page_confidence`` holds ``[start,
    end, value]`` in the order of ``pdf_page_numbers`` (``[start, end, page]``)."""
    (record,) = run.records
    spans = record["attributes"]["pdf_page_numbers"]
    values = record["attributes"]["page_confidence"]
    return {s[2]: v[2] for s, v in zip(spans, values, strict=True)}


def _faulty(run: Run) -> set[int]:
    sent = run.stats["images"]
    return {page for page, tag in run.tags.items() if sent.get(tag, 0) > 1}


def test_the_pages_that_met_a_fault_score_lowest(run: Run) -> None:
    outcomes = run.stats["outcomes"]
    assert outcomes.get("length_fault", 0) + outcomes.get("garbage", 0) >= 3, outcomes
    confidence = _confidences(run)
    assert sorted(confidence) == list(range(1, PAGES + 1))
    faulty = _faulty(run)
    assert 3 <= len(faulty) < PAGES
    clean = [confidence[p] for p in confidence if p not in faulty]
    hit = [confidence[p] for p in faulty]
    # Every faulty page below every clean one: the len(faulty) lowest are the faulty pages.
    assert max(hit) < min(clean), (sorted(hit), sorted(clean))
    assert min(clean) > 0.9  # logprobs of a sure answer at the first temperature
    # The score is made of what the reader recorded.
    (marker,) = done_records(run.out)
    by_page = {p["page"]: p["attributes"] for p in marker["pages"]}
    for page in faulty:
        reasons = by_page[page]["retry_reasons"]
        assert reasons and set(reasons) <= {"truncated", "repetition", "parse_error"}
        assert by_page[page]["temperature_climb"] >= 0
    assert all(0.9 < by_page[p]["mean_token_prob"] <= 1 for p in by_page)


def test_status_spreads_the_pages_across_confidence(run: Run) -> None:
    spread = status_json(run.out)["confidence"]
    confidence = _confidences(run)
    assert sum(spread["pages"].values()) == PAGES
    assert spread["pages"]["unknown"] == 0
    assert spread["pages"][">=0.95"] + spread["pages"]["0.8-0.95"] == sum(
        v >= 0.8 for v in confidence.values()
    )
    assert spread["pages"]["<0.5"] + spread["pages"]["0.5-0.8"] == len(
        [v for v in confidence.values() if v < 0.8]
    )
    lowest = [w["confidence"] for w in spread["lowest"]]
    assert lowest == sorted(confidence.values())[: len(lowest)]
    faulty = _faulty(run)
    worst = [w["page"] for w in spread["lowest"]][: len(faulty)]
    assert set(worst) <= faulty


def test_review_lists_the_low_confidence_pages_worst_first(run: Run, tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = ocrflow(
        "review", str(run.out), "-o", str(site), "--only", "low-confidence", "--below", "0.9",
        "--workers", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [ln.split() for ln in done.stdout.splitlines() if ln.startswith("  ")]
    listed = [(float(parts[0]), int(parts[-1])) for parts in lines]
    confidence = _confidences(run)
    expected = sorted((v, p) for p, v in confidence.items() if v < 0.9)
    assert [p for _, p in listed] == [p for _, p in expected]
    assert [v for v, _ in listed] == sorted(v for v, _ in listed)
    assert {p for _, p in listed} == _faulty(run)
    assert "review of 1 of 1 documents" in done.stdout
    assert "only low-confidence&lt;0.9" in (site / "index.html").read_text()
    # A bar no page is under shows no document.
    none = ocrflow("review", str(run.out), "-o", str(tmp_path / "n"), "--below", "0.05")
    assert none.returncode == 0 and "review of 0 of 1 documents" in none.stdout
    bad = ocrflow("review", str(run.out), "-o", str(tmp_path / "b"), "--below", "7")
    assert bad.returncode == 2 and "--below" in bad.stderr


def test_jsonl_and_parquet_carry_the_page_confidence(run: Run) -> None:
    confidence = _confidences(run)
    (record,) = run.records
    spans = record["attributes"]["pdf_page_numbers"]
    values = record["attributes"]["page_confidence"]
    assert [v[:2] for v in values] == [s[:2] for s in spans]
    (shard,) = sorted((run.out / "parquet").glob("*.parquet"))
    (row,) = pq.read_table(shard).to_pylist()
    assert {p["page"]: p["confidence"] for p in row["pages"]} == confidence
    assert all(json.loads(p["attributes"])["finish_reason"] == "stop" for p in row["pages"])
