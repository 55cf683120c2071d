"""Several ocrflow worker processes on one S3 workspace (a real S3-compatible server,
moto, in its own process); one is killed with SIGKILL mid-run and restarted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.s3server import S3Endpoint

pytestmark = [pytest.mark.s3, pytest.mark.slow]

DOCS = [
    "pdfjs__tracemonkey.pdf",
    "docling__redp5110_sampled.pdf",
    "texlive__texlive-ru.pdf",
    "olmocr__lots_of_sci_tables.pdf",
    "docling__normal_4pages.pdf",
]


#: Pages converted of each document, and pages an item: two items for most documents.
PAGES, SPLIT = 4, 2


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ocrflow.cli", *args]


def _records(endpoint: S3Endpoint, bucket: str) -> list[dict]:
    client = endpoint.client()
    listing = client.list_objects_v2(Bucket=bucket, Prefix="out/results/")
    records = []
    for entry in listing.get("Contents", []):
        body = client.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read().decode()
        records.extend(json.loads(line) for line in body.split("\n") if line)
    return records


def _wait_for_status(
    out: str, env: dict[str, str], until: Callable[[dict[str, Any]], bool], failure: str
) -> None:
    """Poll ``ocrflow status OUT --json`` until ``until(report)`` holds (2 minutes at most)."""
    end = time.monotonic() + 120
    while time.monotonic() < end:
        done = subprocess.run(
            _cli("status", out, "--json"), env=env, capture_output=True, text=True, check=False
        )
        if done.returncode == 0 and until(json.loads(done.stdout)):
            return
        time.sleep(0.3)
    pytest.fail(failure)


def _holds_a_lease(pid: int) -> Callable[[dict[str, Any]], bool]:
    return lambda report: any(f":{pid}:" in lease["owner"] for lease in report["active_leases"])


def test_two_workers_one_killed_every_page_once(
    corpus: Path,
    samples: Path,
    s3_endpoint: S3Endpoint,
) -> None:
    bucket = s3_endpoint.new_bucket("workers")
    out = f"s3://{bucket}/out"
    env = {**os.environ, **s3_endpoint.env}
    inputs = [str(corpus / "pdfs" / d) for d in DOCS] + [str(samples)]
    common = ["--lease-ttl", "6", "--workers", "1", "-q", "--json"]
    # Every page OCRed (about 0.5 s each): two items a document (4 pages in items of 2),
    # still long enough for the second worker to join and be killed holding a lease.
    plan = ["--split-pages", str(SPLIT), "--pages", f"1-{PAGES}", "--text-layer", "off"]
    first = subprocess.Popen(
        _cli("run", *inputs, "-o", out, *plan, *common),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Not a fixed sleep (too long on an idle machine, too short on a busy one): once the run
    # has queued its items, a worker joining it finds work.
    _wait_for_status(
        out, env, lambda report: bool(report["documents"].get("pending")),
        "the run never queued its work items",
    )  # fmt: skip
    second = subprocess.Popen(
        _cli("worker", out, *common),
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_for_status(out, env, _holds_a_lease(second.pid), "the second worker never held a lease")
    os.killpg(second.pid, signal.SIGKILL)  # mid-item: it holds a lease right now
    second.wait(timeout=30)
    again = subprocess.run(
        _cli("worker", out, *common),
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    _stdout, stderr = first.communicate(timeout=900)
    assert first.returncode == 0, stderr[-2000:]
    assert again.returncode == 0, again.stderr[-2000:]

    records = _records(s3_endpoint, bucket)
    names = [Path(r["metadata"]["source_path"]).name for r in records]
    assert sorted(names) == sorted(set(names)) and len(names) == len(DOCS) + 6
    for record in records:
        pages = [s[2] for s in record["attributes"]["pdf_page_numbers"]]
        expected = list(range(1, min(PAGES, record["metadata"]["pdf-total-pages"]) + 1))
        assert pages == expected, record["metadata"]["source_path"]
        text = record["text"]
        assert all(
            text[s:e] == text[s:e].strip() for s, e, _ in record["attributes"]["pdf_page_numbers"]
        )
    status = subprocess.run(
        _cli("status", out, "--json"), env=env, capture_output=True, text=True, check=True
    )
    report = json.loads(status.stdout)
    assert report["documents"] == {"ok": len(DOCS) + 6}
    assert report["active_leases"] == []
    assert len(report["workers"]) >= 2
