"""OS errors on OUT, end to end through ``ocrflow run``: a full disk (a tiny tmpfs), a
read-only OUT (a read-only remount) and a folder the process may not write (permission bits
enforced on a child without root's override). Each stops the run with exit 3 and one line,
leaves every finished document intact, and the next run finishes the rest exactly once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mounts import fill, remount, tmpfs, without_permission_override

from .cli_helpers import ocrflow, results

pytestmark = pytest.mark.slow

ERROR_LINE = re.compile(r"^error: cannot write (/.+): ([^:]+)$")


def _documents(folder: Path, count: int, start: int = 0) -> Path:
    """``count`` born-digital PDFs, each with its own title (the text-layer route is fast)."""
    from make_examples import text_pdf

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + count):
        body = [f"Document number {i}", "", f"The body text of document {i} in plain words."]
        (folder / f"doc{i:02d}.pdf").write_bytes(text_pdf([body, [*body, "Second page."]]))
    return folder


def _run(
    inputs: list[Path], out: Path, *extra: str, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ocrflow.cli", "run", *map(str, inputs), "-o", str(out)]
    return subprocess.run(
        [*prefix, *command, "--text-layer", "only", "--workers", "1", *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _one_error_line(done: subprocess.CompletedProcess[str], out: Path) -> tuple[str, str]:
    """The path and the cause of a run that stopped on OUT: exit 3, stderr one line."""
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    match = ERROR_LINE.match(line)
    assert match is not None, line
    path, cause = match.groups()
    assert path.startswith(f"{out}/"), path
    return path, cause


def _done_markers(out: Path) -> list[dict]:
    folder = out / ".ocrflow" / "done"
    return [json.loads(p.read_text()) for p in folder.glob("*.json")] if folder.is_dir() else []


def _assert_finished_intact(out: Path) -> int:
    """Every document with a done marker has its whole record and Markdown; no result file
    anywhere is partial. Returns how many documents are finished."""
    for path in (out / "results").glob("*.jsonl"):
        [line] = path.read_text().splitlines()
        json.loads(line)
    markers = _done_markers(out)
    for marker in markers:
        [record] = results_of(out, marker["doc_id"])
        number = int(Path(marker["rel"]).stem.removeprefix("doc"))
        assert record["text"].startswith(f"Document number {number}")
        markdown = (out / "markdown" / f"{marker['rel']}.md").read_text()
        assert markdown == record["text"] + "\n"
    return len(markers)


def results_of(out: Path, doc_id: str) -> list[dict]:
    lines = (out / "results" / f"{doc_id}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _assert_each_document_once(out: Path, count: int) -> None:
    names = [f"doc{i:02d}.pdf" for i in range(count)]
    records = results(out)
    assert sorted(r["metadata"]["source_path"] for r in records) == names
    assert sorted(p.name for p in (out / "markdown").iterdir()) == [f"{n}.md" for n in names]
    markers = _done_markers(out)
    assert sorted(m["rel"] for m in markers) == names
    assert {m["status"] for m in markers} == {"ok"}
    assert _assert_finished_intact(out) == count
    assert not list((out / ".ocrflow" / "tmp").iterdir())


def test_disk_full_stops_in_one_line_and_the_next_run_resumes(tmp_path: Path) -> None:
    inputs = [_documents(tmp_path / "in", 12)]
    with tmpfs(tmp_path / "disk", "1m") as disk:
        out = disk / "out"
        filler = fill(disk, 100 * 1024)  # room for the workspace and a few documents

        full = _run(inputs, out, "-q")
        _, cause = _one_error_line(full, out)
        assert cause == "No space left on device"
        finished = _assert_finished_intact(out)
        assert 0 < finished < 12, finished
        assert not list((out / ".ocrflow" / "tmp").iterdir())  # failed writes left no temp

        # Still full, not quiet: the log lines of finished documents, then the same one line.
        again = _run(inputs, out)
        assert again.returncode == 3 and "Traceback" not in again.stderr, again.stderr
        assert ERROR_LINE.match(again.stderr.splitlines()[-1])

        filler.unlink()
        resumed = _run(inputs, out, "-q")
        assert resumed.returncode == 0, resumed.stderr
        _assert_each_document_once(out, 12)


def test_read_only_out_stops_in_one_line_and_status_still_reads_it(tmp_path: Path) -> None:
    first, more = _documents(tmp_path / "in", 4), _documents(tmp_path / "more", 2, start=4)
    with tmpfs(tmp_path / "disk", "4m") as disk:
        out = disk / "out"
        assert _run([first], out, "-q").returncode == 0
        remount(disk, "ro")
        try:
            status = ocrflow("status", str(out), "--json")
            assert status.returncode == 0, status.stderr
            assert json.loads(status.stdout)["documents"] == {"ok": 4}
            _, cause = _one_error_line(_run([first, more], out, "-q"), out)
            assert cause == "Read-only file system"
        finally:
            remount(disk, "rw")
        resumed = _run([first, more], out, "-q")
        assert resumed.returncode == 0, resumed.stderr
        _assert_each_document_once(out, 6)


def test_permission_denied_on_an_out_folder_stops_in_one_line(tmp_path: Path) -> None:
    prefix = without_permission_override()
    inputs = [_documents(tmp_path / "in", 3)]
    out = tmp_path / "out"
    (out / "markdown").mkdir(parents=True)
    os.chmod(out / "markdown", 0o555)
    try:
        denied = _run(inputs, out, "-q", prefix=prefix)
        path, cause = _one_error_line(denied, out)
        assert cause == "Permission denied"
        assert re.fullmatch(rf"{out}/markdown/doc0\d\.pdf\.md", path)
        assert _done_markers(out) == []  # no done marker for a document whose output failed
    finally:
        os.chmod(out / "markdown", 0o755)
    resumed = _run(inputs, out, "-q", prefix=prefix)
    assert resumed.returncode == 0, resumed.stderr
    _assert_each_document_once(out, 3)


def test_an_unreadable_input_stays_a_per_document_failure(tmp_path: Path) -> None:
    prefix = without_permission_override()
    inputs = _documents(tmp_path / "in", 3)
    os.chmod(inputs / "doc01.pdf", 0o000)  # reading inputs is not writing OUT: no exit 3
    out = tmp_path / "out"
    done = _run([inputs], out, "-q", prefix=prefix)
    assert done.returncode == 1, done.stderr
    statuses = {m["rel"]: m["status"] for m in _done_markers(out)}
    assert statuses == {"doc00.pdf": "ok", "doc01.pdf": "failed", "doc02.pdf": "ok"}
