"""A 500-page run against a faulty VLM server: nothing lost, nothing doubled, no page late.

The fake server answers at 40 pages/s with 5% HTTP 500s, 2% 429s, 1% requests that hang,
3% replies cut at ``length`` and 3% unparsable replies. The real CLI runs as a subprocess
with a 5 s request timeout and a 60 s page deadline (the settings of the original report:
142 of 500 pages fell back on "deadline passed" and the server counted 909 aborted
requests, because the wait for a free slot was timed as if it were the request).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakevllm.process import running_server

from .cli_helpers import ocrflow
from .vlm_helpers import (
    MODEL,
    check_tags,
    done_records,
    page_texts,
    rendered_tags,
    requests_sent,
    vlm_args,
)

pytestmark = pytest.mark.slow

DOCUMENT = "unstructured__DA-619p.pdf"
PAGES = 500
REQUEST_TIMEOUT_S = 10.0
PAGE_DEADLINE_S = 60.0
FAULTS = (
    "--fail-500", "0.05",
    "--fail-429", "0.02",
    "--hang", "0.01",
    "--length", "0.03",
    "--garbage", "0.03",
)  # fmt: skip


@dataclass
class FaultyRun:
    out: Path
    pdf: Path
    returncode: int
    stderr: str
    wall_s: float
    server: dict[str, Any]
    pages: list[dict[str, Any]]
    texts: list[tuple[int, str]]


@pytest.fixture(scope="module")
def run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> FaultyRun:
    out = tmp_path_factory.mktemp("faults") / "out"
    pdf = corpus / "pdfs" / DOCUMENT
    flags = ("--reply-format", "olmocr", "--model", MODEL, "--pages-per-s", "40", "--seed", "11")
    with running_server(*flags, *FAULTS) as server:
        started = time.monotonic()
        done = ocrflow(
            "run", str(pdf), "-o", str(out), "--pages", f"1-{PAGES}",
            *vlm_args(
                server.base_url,
                "--request-timeout", str(REQUEST_TIMEOUT_S),
                "--page-deadline", str(PAGE_DEADLINE_S),
                "--max-page-error-rate", "0.1",
            ),
            timeout=600,
        )  # fmt: skip
        wall = time.monotonic() - started
        stats = server.stats()
    records = done_records(out)
    texts = page_texts(out)
    result = FaultyRun(
        out,
        pdf,
        done.returncode,
        done.stderr,
        wall,
        stats,
        [p for r in records for p in r["pages"]],
        [t for pages in texts.values() for t in pages],
    )
    routes = Counter(p["route"] for p in result.pages)
    print(f"\nfaulty run: {wall:.1f} s, routes {dict(routes)}, outcomes {stats['outcomes']}")
    return result


def test_the_run_finishes(run: FaultyRun) -> None:
    assert run.returncode == 0, run.stderr[-3000:]


def test_every_page_exactly_once(run: FaultyRun) -> None:
    numbers = [number for number, _ in run.texts]
    assert sorted(numbers) == list(range(1, PAGES + 1))
    assert sorted(p["page"] for p in run.pages) == list(range(1, PAGES + 1))


def test_every_page_is_converted_or_a_recorded_fallback(run: FaultyRun) -> None:
    routes = Counter(p["route"] for p in run.pages)
    assert set(routes) <= {"engine", "fallback", "blank"}, routes
    fallbacks = [p for p in run.pages if p["route"] == "fallback"]
    reasons = Counter((p["error"] or "")[:60] for p in fallbacks)
    assert all(p["error"] and p["status"] == "ok" for p in fallbacks), reasons
    # The faults are retried away: the original report saw 142 of 500 pages fall back.
    assert len(fallbacks) <= PAGES * 0.01, reasons


def test_each_page_holds_its_own_image_s_answer(run: FaultyRun) -> None:
    tags = check_tags(run.texts)
    engine_pages = {p["page"] for p in run.pages if p["route"] == "engine"}
    assert set(tags) == engine_pages
    sample = tuple(sorted(random.Random(5).sample(sorted(engine_pages), 12)))
    assert {n: tags[n] for n in sample} == rendered_tags(run.pdf, sample)


def test_no_page_is_sent_again_once_it_succeeded(run: FaultyRun) -> None:
    """The server saw each image at most as often as the reader asked: attempts + retries."""
    images: dict[str, int] = run.server["images"]
    tags = check_tags(run.texts)
    by_page = {p["page"]: p for p in run.pages}
    for number, tag in tags.items():
        assert 1 <= images[tag] <= requests_sent(by_page[number]), (number, by_page[number])
    retried = sum(1 for tag in tags.values() if images[tag] > 1)
    assert retried > 0.05 * PAGES  # the faults did happen, and were retried
    assert sum(images.values()) <= sum(requests_sent(p) for p in run.pages)


def test_no_page_outlives_its_deadline(run: FaultyRun) -> None:
    read = [p for p in run.pages if p["route"] != "blank"]
    slowest = max(p["attributes"]["elapsed_s"] for p in read)
    assert slowest <= PAGE_DEADLINE_S + 1.0


def test_faults_happened_and_few_requests_were_abandoned(run: FaultyRun) -> None:
    outcomes = run.server["outcomes"]
    for fault in ("fail_500", "fail_429", "hang", "length_fault", "garbage"):
        assert outcomes.get(fault, 0) > 0, fault
    # Hung requests (1 %) and a few queued behind a brief overshoot of the limit may time
    # out; a busy machine slows the server's steps too. The bug this guards against gave
    # 909 aborted requests for 500 pages.
    assert outcomes.get("aborted", 0) <= 0.1 * PAGES
