"""A hostile archive through the real CLI: odd names and odd files each get an outcome (a
document status or a counted skip), nothing hangs, no traceback, exit codes as documented.
Every input is generated here; the whole module runs in seconds."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from .cli_helpers import ocrflow, results, status_json

NFC = unicodedata.normalize("NFC", "café-twin.pdf")
NFD = unicodedata.normalize("NFD", "café-twin.pdf")
#: Documents the walk finds, by name as bytes: every one is converted (``ok``).
GOOD = (
    b"caf\xe9.pdf",  # Latin-1
    b"caf\xe8.pdf",  # Latin-1, one byte apart
    b"line\nbreak.pdf",
    b"x" * 240 + b".pdf",  # 244 bytes: name + ".md" does not fit a file name
    b"Report.pdf",
    b"report.pdf",
    NFC.encode(),
    NFD.encode(),
    b"-rf.pdf",  # a leading dash
    b"a..b.pdf",
    b"[red]markup[bold].pdf",  # rich markup in a name
)
#: What the walk must leave out, and why.
SKIPS = {"hidden": 2, "not_a_document": 2, "not_a_file": 3, "broken_link": 1}


def _pdf(title: str) -> bytes:
    from make_examples import text_pdf

    return text_pdf([[title, "", f"The body of {title}, in plain words for its text layer."]])


def _put(folder: Path, raw: bytes, data: bytes) -> None:
    path = os.path.join(os.fsencode(folder), raw)
    with open(path, "wb") as handle:
        handle.write(data)


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "archive"
    (folder / "x.pdf").mkdir(parents=True)  # a folder named like a document
    for i, raw in enumerate(GOOD):
        _put(folder, raw, _pdf(f"Document number {i}"))
    _put(folder / "x.pdf", b"inner.pdf", _pdf("Inside a folder named x.pdf"))
    _put(folder, b"empty.pdf", b"")
    _put(folder, b"truncated.pdf", _pdf("Truncated")[:300])
    _put(folder, b"notes.txt", b"not a document\n")
    _put(folder, b"no-suffix", b"")  # empty, no suffix: not a document
    _put(folder, b"..pdf", _pdf("hidden"))  # a name of dots: hidden
    _put(folder, b".DS_Store", b"\0\0\0\1Bud1")
    os.mkfifo(folder / "fifo.pdf")
    (folder / "zero.pdf").symlink_to("/dev/zero")
    (folder / "loop.pdf").symlink_to(folder / "loop.pdf")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(folder / "sock.pdf"))
        yield folder


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    done = ocrflow("run", *args, "--json", timeout=timeout)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_every_odd_file_gets_an_outcome(hostile: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = (str(hostile), "-o", str(out), "--text-layer", "only", "--workers", "1")
    done = _run(*args)
    assert done.returncode == 1, done.stderr  # two documents failed, the rest converted
    summary = json.loads(done.stdout)
    assert summary["documents"] == {"ok": len(GOOD) + 1, "failed": 2}, summary
    reasons = {Path(f["source"]).name: f["reason"] for f in summary["failures"]}
    assert reasons == {"empty.pdf": "empty", "truncated.pdf": "corrupt"}
    assert summary["files_skipped"] == SKIPS
    assert status_json(out)["files_skipped"] == SKIPS

    markdown = {p.name for p in (out / "markdown").rglob("*.md")}
    assert len(markdown) == len(GOOD) + 1 and len({m.casefold() for m in markdown}) == len(markdown)
    assert "caf%E9.pdf.md" in markdown and "caf%E8.pdf.md" in markdown
    assert all(len(m.encode()) <= 255 and "\n" not in m for m in markdown)
    texts = sorted(r["text"].split("\n")[0] for r in results(out) if r["text"])
    assert texts == sorted([f"Document number {i}" for i in range(len(GOOD))]
                           + ["Inside a folder named x.pdf"])  # fmt: skip

    again = _run(*args)  # resumes: everything is found done, and reported the same way
    assert again.returncode == 1 and json.loads(again.stdout)["documents_skipped"] == len(GOOD) + 3


def test_odd_files_named_as_inputs_fail_unread(hostile: Path, tmp_path: Path) -> None:
    names = ["fifo.pdf", "sock.pdf", "zero.pdf", "loop.pdf", "notes.txt", "empty.pdf"]
    inputs = [str(hostile / n) for n in names] + ["/dev/urandom"]
    done = _run(*inputs, "-o", str(tmp_path / "out"), timeout=60)  # never reads a device
    assert done.returncode == 1, done.stderr
    reasons = {f["source"]: f["reason"] for f in json.loads(done.stdout)["failures"]}
    assert reasons == {
        str(hostile / "fifo.pdf"): "not_a_file",
        str(hostile / "sock.pdf"): "not_a_file",
        "/dev/zero": "not_a_file",  # zero.pdf, a link to it
        "/dev/urandom": "not_a_file",
        str(hostile / "loop.pdf"): "unreadable",
        str(hostile / "notes.txt"): "not_a_document",
        str(hostile / "empty.pdf"): "empty",
    }


def test_latin1_names_reach_every_output_readable(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    _put(folder, b"caf\xe9.pdf", _pdf("Latin one"))
    out = tmp_path / "out"
    args = (str(folder), "-o", str(out), "--format", "markdown,jsonl,parquet", "--text-layer",
            "only")  # fmt: skip
    done = _run(*args)
    assert done.returncode == 0, done.stderr
    (record,) = results(out)
    source = record["metadata"]["Source-File"]
    assert source == f"file://{folder}/caf%E9.pdf" and record["metadata"]["source_path"] == (
        "caf%E9.pdf"
    )
    assert (out / "markdown" / "caf%E9.pdf.md").read_text().startswith("Latin one")
    (row,) = pq.read_table(next((out / "parquet").glob("*.parquet"))).to_pylist()
    assert row["source"] == source
    assert status_json(out)["documents"] == {"ok": 1}
    assert json.loads(_run(*args).stdout)["documents_skipped"] == 1


def test_nothing_to_convert_exits_5_and_says_why(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = _run(str(empty), "-o", str(tmp_path / "out"))
    assert done.returncode == 5, done.stderr
    assert "nothing to convert" in done.stderr
    texts = tmp_path / "texts"
    texts.mkdir()
    for name in ("a.txt", "b.txt", ".hidden.txt"):
        (texts / name).write_text("words")
    done = _run(str(texts), "-o", str(tmp_path / "out"))
    assert done.returncode == 5, done.stderr
    assert json.loads(done.stdout)["files_skipped"] == {"not_a_document": 2, "hidden": 1}
    assert "a.txt" in done.stderr and "2 not_a_document" in done.stderr
    assert not (tmp_path / "out").exists()  # nothing was planned


def test_another_runs_out_and_review_site_are_not_inputs(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "docs").mkdir(parents=True)
    (tree / "docs" / "a.pdf").write_bytes(_pdf("The only document"))
    first = tree / "old-out"
    assert _run(str(tree / "docs"), "-o", str(first)).returncode == 0
    for site in ([], ["-o", str(tree / "site")]):  # in OUT, and a site of its own
        review = ocrflow("review", str(first), *site)
        assert review.returncode == 0, review.stderr
    assert list((tree / "site" / "pages").rglob("*.jpg"))  # images a walk would take
    done = _run(str(tree), "-o", str(tmp_path / "out2"))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["documents"] == {"ok": 1}
    assert summary["files_skipped"] == {"ocrflow_output": 2}  # old-out/ and site/


def test_the_image_pixel_limit_is_a_flag(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    Image.new("L", (3000, 3000), 255).save(folder / "scan.png")  # 9 MP
    small = tmp_path / "small"
    done = _run(str(folder), "-o", str(small), "--max-image-pixels", "4000000")
    (failure,) = json.loads(done.stdout)["failures"]
    assert failure["reason"] == "too_large" and "--max-image-pixels" in failure["message"]
    raised = ocrflow("retry", str(small), "--reason", "too_large", "--max-image-pixels",
                     "10000000")  # fmt: skip
    assert raised.returncode == 0, raised.stderr
    assert status_json(small)["documents"] == {"ok": 1}
    assert _run(str(folder), "-o", str(tmp_path / "default")).returncode == 0
    bad = _run(str(folder), "-o", str(tmp_path / "bad"), "--max-image-pixels", "10")
    assert bad.returncode == 2 and "--max-image-pixels" in bad.stderr
