"""A local Ray cluster gives the same outputs as the local executor, and a run whose actor
is killed mid-item still finishes every document once, counts them all and says so."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import make_examples
import pytest

from tests.fakevllm.process import running_server
from tests.integration.ray_clusters import (  # noqa: F401  (one_ray_cluster: autouse)
    ATTEMPTS,
    STARTUP_TIMED_OUT,
    one_ray_cluster,
    until_ray_starts,
)
from tests.needs import need

from .cli_helpers import ocrflow, results, status_json
from .vlm_helpers import MODEL, vlm_args

pytestmark = pytest.mark.slow
need(
    "ray",
    importlib.util.find_spec("ray") is not None,
    "Ray is not installed: pip install 'ocrflow[ray]'",
)


def _pages(out: Path) -> dict[str, list[tuple[int, str]]]:
    found = {}
    for record in results(out):
        text = record["text"]
        found[record["metadata"]["source_path"]] = [
            (page, text[start:end]) for start, end, page in record["attributes"]["pdf_page_numbers"]
        ]
    return found


def test_ray_run_equals_local_run(samples: Path, corpus: Path, tmp_path: Path) -> None:
    inputs = [str(samples), str(corpus / "pdfs" / "docling__redp5110_sampled.pdf")]
    local = ocrflow("run", *inputs, "-o", str(tmp_path / "local"), "--split-pages", "8", "-q")
    assert local.returncode == 0, local.stderr[-2000:]
    on_ray = until_ray_starts(
        lambda: ocrflow(
            "run",
            *inputs,
            "-o",
            str(tmp_path / "ray"),
            "--executor",
            "ray",
            "--ray-workers",
            "2",
            "--workers",
            "1",
            "--split-pages",
            "8",
            "--json",
            "-q",
            env={"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"},
        )
    )
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    assert json.loads(on_ray.stdout)["documents"] == {"ok": 7}
    local_pages, ray_pages = _pages(tmp_path / "local"), _pages(tmp_path / "ray")
    assert set(local_pages) == set(ray_pages)
    assert local_pages == ray_pages


RAY_ENV = {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}


def _owners(out: Path) -> dict[str, str]:
    """Item id -> owner of its lease, for the leases on disk now."""
    found = {}
    for path in (out / ".ocrflow" / "leases").glob("*.json"):
        try:
            found[path.stem] = json.loads(path.read_text())["owner"]
        except (FileNotFoundError, ValueError):
            continue
    return found


def _pick_victim(out: Path, driver: subprocess.Popen[str], deadline_s: float = 120) -> int | None:
    """The pid of an actor that has committed documents and holds a lease right now; None
    when the driver ended first."""
    last_owner: dict[str, str] = {}
    committed: dict[str, int] = {}
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and driver.poll() is None:
        owners = _owners(out)
        last_owner.update(owners)
        for done in (out / ".ocrflow" / "items").glob("*.json"):
            owner = last_owner.pop(done.stem, None)
            if owner:
                committed[owner] = committed.get(owner, 0) + 1
        for owner in set(owners.values()):
            if committed.get(owner, 0) >= 2:
                return int(owner.split(":")[1])
        time.sleep(0.05)
    if driver.poll() is not None:
        return None
    pytest.fail("no actor committed documents while holding more")


def test_actor_killed_mid_item_every_document_once_and_counted(tmp_path: Path) -> None:
    count = 8
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    for n in range(count):
        (inputs / f"doc{n}.pdf").write_bytes(make_examples.text_pdf([[f"Document {n}"]]))
    # One page at a time per actor, each held a second by the server: an actor claims
    # every document it can at once and commits them one by one.
    flags = ("--reply-format", "olmocr", "--model", MODEL, "--pages-per-s", "200")
    flags += ("--slow", "1", "--slow-s", "1")
    with running_server(*flags) as server:
        args = vlm_args(server.base_url, "--max-concurrency", "1", "--workers", "1")
        for attempt in range(1, ATTEMPTS + 1):
            shutil.rmtree(out, ignore_errors=True)
            driver = subprocess.Popen(
                [sys.executable, "-m", "ocrflow.cli", "run", str(inputs), "-o", str(out), *args,
                 "--executor", "ray", "--ray-workers", "2"],
                env={**os.environ, **RAY_ENV}, text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            try:
                victim = _pick_victim(out, driver)
                if victim is None:  # the driver ended before an actor could be killed
                    stdout, stderr = driver.communicate()
                    if STARTUP_TIMED_OUT in stderr and attempt < ATTEMPTS:
                        continue  # Ray's node did not come up: nothing of ours ran
                    pytest.fail(f"the run ended first (exit {driver.returncode}) {stderr[-3000:]}")
                assert victim != driver.pid
                os.kill(victim, signal.SIGKILL)  # the actor's process: Ray sees it die
                stdout, stderr = driver.communicate(timeout=300)
                break
            finally:
                if driver.poll() is None:
                    driver.kill()
                    driver.communicate()
    assert driver.returncode == 0, stderr[-3000:]
    summary = json.loads(stdout)
    # Every document once, and counted, although the dead actor's own tallies are gone.
    assert summary["documents"] == {"ok": count}
    assert summary["pages"] == {"ok": count}
    assert summary["workers_lost"] == 1
    assert [f["status"] for f in summary["failures"]] == ["worker_lost"]
    records = results(out)
    assert sorted(r["metadata"]["source_path"] for r in records) == [
        f"doc{n}.pdf" for n in range(count)
    ]
    assert all([s[2] for s in r["attributes"]["pdf_page_numbers"]] == [1] for r in records)
    report = status_json(out)
    assert report["documents"] == {"ok": count} and report["active_leases"] == []
