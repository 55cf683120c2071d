"""Leases between workers on different hosts, with real processes on one local OUT.

A lease held on this host also ends when its process is gone; on another host only its
expiry can tell. The holder here is an ``ocrflow run`` child with ``OCRFLOW_HOST_ID=host-a``
(it plays a worker on another machine); pages go to the fake VLM server, whose ``slow``
fault holds a page for as long as a test needs the item to stay in progress.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from threading import Thread
from typing import Any

import make_examples
import pytest

from ocrflow.config import EngineOptions, RenderOptions, RouteOptions, RunConfig, ScaleOptions
from ocrflow.executors.item_loop import WorkerOptions
from ocrflow.executors.local import plan_run
from ocrflow.executors.worker import work
from ocrflow.observe.runstats import RunStats
from ocrflow.storage.local import LocalStore
from ocrflow.workspace.leases import HOST_ID_VARIABLE, LEASES_DIR, LeaseManager, new_owner
from ocrflow.workspace.state import Workspace
from tests.fakevllm.process import running_server

from .cli_helpers import results, status_json
from .vlm_helpers import MODEL, vlm_args

pytestmark = pytest.mark.slow

OTHER_HOST = "host-a"
SERVER = ("--reply-format", "olmocr", "--model", MODEL, "--pages-per-s", "40")


def _inputs(folder: Path, count: int) -> Path:
    """``count`` one-page born-digital PDFs (OCR'd anyway: the runs use --text-layer off)."""
    folder.mkdir()
    for n in range(count):
        lines = [f"Document {n}", f"Line {n} of a page that the fake server reads."]
        (folder / f"doc{n}.pdf").write_bytes(make_examples.text_pdf([lines]))
    return folder


@contextmanager
def _ocrflow(*args: str, host: str | None = None) -> Iterator[subprocess.Popen[str]]:
    """``ocrflow ARGS`` in its own process group (render workers included), killed at exit."""
    env = {k: v for k, v in os.environ.items() if k != HOST_ID_VARIABLE}
    if host:
        env[HOST_ID_VARIABLE] = host
    process = subprocess.Popen(
        [sys.executable, "-m", "ocrflow.cli", *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)


def _summary(process: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    stdout, stderr = process.communicate(timeout=timeout)
    assert process.returncode == 0, stderr[-3000:]
    return json.loads(stdout)


def _leases(out: Path) -> dict[str, dict[str, Any]]:
    """Lease records by item id, as they are on disk now."""
    found = {}
    for path in (out / LEASES_DIR).glob("*.json"):
        try:
            found[path.stem] = json.loads(path.read_text())
        except FileNotFoundError:
            continue  # released meanwhile
    return found


def _wait_until(ready: Callable[[], bool], what: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if ready():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def _held_by(out: Path, holder: subprocess.Popen[str], count: int) -> dict[str, dict[str, Any]]:
    """Wait until ``count`` leases are held by ``holder``, on the other host."""
    prefix = f"{OTHER_HOST}:{holder.pid}:"

    def held() -> bool:
        if holder.poll() is not None:
            pytest.fail(f"the holder exited ({holder.returncode}): {holder.communicate()[1]}")
        leases = _leases(out)
        return sum(r["owner"].startswith(prefix) for r in leases.values()) >= count

    _wait_until(held, f"{count} leases of {prefix}")
    return _leases(out)


def _stop_outside_lease_locks(holder: subprocess.Popen[str], out: Path) -> None:
    """SIGSTOP the holder's process group, but not in the middle of renewing a lease.

    A process stopped while it holds a lease's lock keeps that lease its own until it goes
    on (others give up waiting and pass the item by: ``LocalStore.write_if_match``); the
    test is about a worker paused between renewals, so it stops the holder again until no
    lock is held.
    """
    for _ in range(100):
        os.killpg(holder.pid, signal.SIGSTOP)
        _wait_until(lambda: _all_threads_stopped(holder.pid), "the holder to stop")
        if not any(_lock_taken(lock) for lock in (out / LEASES_DIR).glob("*.lock")):
            return
        os.killpg(holder.pid, signal.SIGCONT)
        time.sleep(0.01)
    pytest.fail("the holder was always inside a lease lock")


def _all_threads_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` has stopped (a signal is delivered, not yet obeyed,
    when ``kill`` returns)."""
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            if stat.read_text().rsplit(") ", 1)[1][0] != "T":
                return False
        except FileNotFoundError:
            continue  # a thread that has just ended
    return True


def _lock_taken(path: Path) -> bool:
    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False


def _check_each_document_once(out: Path, count: int) -> None:
    records = results(out)
    names = sorted(r["metadata"]["source_path"] for r in records)
    assert names == [f"doc{n}.pdf" for n in range(count)]
    for record in records:
        assert [s[2] for s in record["attributes"]["pdf_page_numbers"]] == [1]
        assert record["metadata"]["status"] == "ok"
    done = list((out / ".ocrflow" / "done").glob("*.json"))
    assert len(done) == count
    assert all(len(json.loads(p.read_text())["pages"]) == 1 for p in done)
    report = status_json(out)
    assert report["documents"] == {"ok": count}
    assert report["active_leases"] == []


def _snapshot(out: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every output and completion record: inode, mtime and bytes (a rewrite changes them)."""
    found = {}
    for folder in ("results", "markdown", ".ocrflow/done", ".ocrflow/items"):
        for path in sorted((out / folder).rglob("*")):
            if path.is_file():
                stat = path.stat()
                key = str(path.relative_to(out))
                found[key] = (stat.st_ino, stat.st_mtime_ns, path.read_bytes())
    return found


def test_killed_holder_on_another_host_keeps_its_leases_until_they_expire(
    tmp_path: Path,
) -> None:
    inputs, out = _inputs(tmp_path / "in", 3), tmp_path / "out"
    with running_server(*SERVER, "--slow", "1", "--slow-s", "60") as server:
        run = vlm_args(server.base_url, "--lease-ttl", "3", "--workers", "1")
        with _ocrflow("run", str(inputs), "-o", str(out), *run, host=OTHER_HOST) as holder:
            _held_by(out, holder, 3)
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait(timeout=30)
        leases = _leases(out)  # after the kill: the last renewal is on disk
        assert len(leases) == 3 and all(f":{holder.pid}:" in r["owner"] for r in leases.values())
        expiry = min(r["expires"] for r in leases.values())
        server.set_faults(slow=0)
        probe = LeaseManager(LocalStore(out), new_owner(), ttl_s=3)
        with _ocrflow("worker", str(out), "--json", "-q") as joiner:
            # The holder's pid is dead, but on "another host" that cannot be seen: until
            # the expiry neither the worker nor a claim made here takes the items.
            while time.time() < expiry - 0.3:
                assert _leases(out) == leases
                assert all(probe.claim(item) is None for item in leases)
                time.sleep(0.2)
            summary = _summary(joiner)
    assert summary["documents"] == {"ok": 3} and summary["pages"] == {"ok": 3}
    _check_each_document_once(out, 3)


def test_heartbeat_keeps_a_slow_page_leased_past_several_ttls(tmp_path: Path) -> None:
    inputs, out = _inputs(tmp_path / "in", 1), tmp_path / "out"
    with running_server(*SERVER, "--slow", "1", "--slow-s", "5") as server:
        run = vlm_args(server.base_url, "--lease-ttl", "1", "--workers", "1")
        with _ocrflow("run", str(inputs), "-o", str(out), *run, host=OTHER_HOST) as holder:
            [item] = _held_by(out, holder, 1)
            probe = LeaseManager(LocalStore(out), new_owner(), ttl_s=1)
            with _ocrflow("worker", str(out), "--json", "-q") as rival:
                expiries = []
                while holder.poll() is None:
                    taken = probe.claim(item)
                    if taken is not None:  # only once the holder has finished the item
                        assert (out / ".ocrflow" / "items" / f"{item}.json").exists()
                        probe.release(taken)
                        break
                    expiries += [r["expires"] for r in _leases(out).values()]
                    time.sleep(0.2)
                held, rivalled = _summary(holder), _summary(rival)
        images = server.stats()["images"]
    # Renewed all along: the lease outlived four TTLs, and nobody else took the page.
    assert max(expiries) - min(expiries) >= 3, expiries
    assert held["documents"] == {"ok": 1} and held["leases_lost"] == 0
    assert rivalled["pages"] == {} and rivalled["documents"] == {}
    assert list(images.values()) == [1]  # the page was asked of the server once
    _check_each_document_once(out, 1)


def test_worker_paused_past_its_ttl_drops_the_items_it_lost(tmp_path: Path) -> None:
    count = 2
    inputs, out = _inputs(tmp_path / "in", count), tmp_path / "out"
    with running_server(*SERVER, "--slow", "1", "--slow-s", "4") as server:
        run = vlm_args(server.base_url, "--lease-ttl", "2", "--workers", "1")
        with _ocrflow("run", str(inputs), "-o", str(out), *run, host=OTHER_HOST) as holder:
            _held_by(out, holder, count)
            _wait_until(
                lambda: server.stats()["outcomes"].get("slow", 0) >= count, "pages in flight"
            )
            _stop_outside_lease_locks(holder, out)
            server.set_faults(slow=0)
            expiry = max(r["expires"] for r in _leases(out).values())
            time.sleep(max(0.0, expiry - time.time()) + 0.2)
            with _ocrflow("worker", str(out), "--json", "-q") as joiner:
                took_over = _summary(joiner)
            finished = _snapshot(out)
            # Resume the holder once the server has answered its pages too: the answers wait
            # in its sockets, racing its heartbeat, and its leases are gone either way.
            answered = lambda: server.stats()["outcomes"].get("stop", 0) >= 2 * count  # noqa: E731
            _wait_until(answered, "the answers to the paused worker", timeout=30)
            time.sleep(0.3)
            os.killpg(holder.pid, signal.SIGCONT)
            resumed = _summary(holder)
    assert took_over["documents"] == {"ok": count} and took_over["leases_lost"] == 0
    assert resumed["leases_lost"] == count and resumed["documents"] == {}
    assert _snapshot(out) == finished  # nothing written again, not even the same bytes
    assert not list((out / ".ocrflow" / "pages").glob("*/*.json"))  # no late checkpoints
    _check_each_document_once(out, count)


class StallingStore(LocalStore):
    """A local store on which one lease renewal can be made to hang (a store that stops
    answering for a while): ``stall`` arms it, ``stalled`` says it hangs, ``resume`` ends it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.stall, self.stalled, self.resume = (threading.Event() for _ in range(3))

    def write_if_match(self, key: str, data: bytes, etag: str | None) -> bool:
        if key.startswith(LEASES_DIR) and etag is not None and self.stall.is_set():
            self.stall.clear()
            self.stalled.set()
            self.resume.wait(timeout=60)
        return super().write_if_match(key, data, etag)


def _work_in_thread(config: RunConfig, store: LocalStore, owner: str) -> tuple[Thread, list]:
    """``work()`` in a thread of this process, as one worker; its stats (or error) land in
    the returned list."""
    outcome: list[object] = []
    options = WorkerOptions(owner=owner, lease_ttl_s=config.scale.lease_ttl_s, idle_poll_s=0.2)

    def target() -> None:
        try:
            outcome.append(asyncio.run(work(config, Workspace(store), options=options)))
        except Exception as exc:  # handed to the test, which fails on it
            outcome.append(exc)

    thread = Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def test_worker_whose_renewal_stalled_past_the_ttl_commits_nothing(tmp_path: Path) -> None:
    """The heartbeat cannot warn the item here (its renewal hangs on the store): the check
    right before the commit is what keeps the late worker from writing the item again."""
    inputs, out = _inputs(tmp_path / "in", 1), tmp_path / "out"
    with running_server(*SERVER, "--slow", "1", "--slow-s", "3") as server:
        config = RunConfig(
            inputs=(str(inputs),),
            output=str(out),
            render=RenderOptions(workers=1),
            route=RouteOptions(text_layer="off"),
            engine=EngineOptions(
                kind="openai", servers=(server.base_url,), model=MODEL, recipe="olmocr"
            ),
            scale=ScaleOptions(lease_ttl_s=1.5),
        )
        plan_run(config)
        store = StallingStore(out)
        owner = f"{OTHER_HOST}:{os.getpid()}:late"
        thread, outcome = _work_in_thread(config, store, owner)
        _wait_until(lambda: any(r["owner"] == owner for r in _leases(out).values()), "a lease")
        _wait_until(lambda: server.stats()["outcomes"].get("slow", 0) >= 1, "the page asked")
        store.stall.set()
        _wait_until(store.stalled.is_set, "a stalled renewal")
        server.set_faults(slow=0)
        [record] = _leases(out).values()
        time.sleep(max(0.0, record["expires"] - time.time()) + 0.2)
        with _ocrflow("worker", str(out), "--json", "-q") as joiner:
            took_over = _summary(joiner)
        finished = _snapshot(out)
        # The late worker gets its answer and would commit now; then its renewal returns.
        answered = lambda: server.stats()["outcomes"].get("stop", 0) >= 2  # noqa: E731
        _wait_until(answered, "the late worker's answer", timeout=30)
        time.sleep(0.5)
        store.resume.set()
        thread.join(timeout=60)
    [stats] = outcome
    assert isinstance(stats, RunStats), stats
    assert took_over["documents"] == {"ok": 1}
    assert stats.leases_lost == 1 and dict(stats.documents) == {}
    assert _snapshot(out) == finished
    assert not list((out / ".ocrflow" / "pages").glob("*/*.json"))  # its checkpoint removed
    _check_each_document_once(out, 1)
