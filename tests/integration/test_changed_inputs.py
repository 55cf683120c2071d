"""A file changed at the same path is converted again on the next run, and its new outputs
replace the old ones in every format: one Markdown file, one JSONL record, one Parquet row
per document, with the new text. A file only touched (same bytes) is not converted again."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import make_examples
import pyarrow.dataset as ds
import pytest

from tests.s3server import S3Endpoint

from .cli_helpers import ocrflow, results, status_json

pytestmark = pytest.mark.slow

FORMATS = ("--format", "markdown,jsonl,parquet")
CHANGED = "changed since it was converted"


def _pdf(path: Path, *pages: str) -> None:
    path.write_bytes(make_examples.text_pdf([[text] for text in pages]))


def _run(inputs: Path, out: Path, *extra: str) -> str:
    done = ocrflow("run", str(inputs), "-o", str(out), *FORMATS, *extra)
    assert done.returncode == 0, done.stderr
    return done.stderr


def _parquet_rows(out: Path) -> list[dict]:
    """Every row of every shard, as any Parquet reader of OUT/parquet sees them."""
    files = [str(p) for p in sorted((out / "parquet").glob("*.parquet"))]
    table = ds.dataset(files, format="parquet").to_table(columns=["id", "text", "source"])
    return table.to_pylist()


def _texts(out: Path) -> dict[str, str]:
    by_name: dict[str, str] = {}
    for record in results(out):
        name = Path(record["metadata"]["source_path"]).name
        assert name not in by_name, f"two JSONL records for {name}"
        by_name[name] = " ".join(record["text"].split())
    return by_name


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    _pdf(folder / "report.pdf", "The first version of the report.")
    _pdf(folder / "other.pdf", "A document that does not change.")
    return folder


def test_a_changed_file_is_converted_again_everywhere(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(inputs, out)
    assert "first version" in _texts(out)["report.pdf"]
    old_ids = {r["id"] for r in results(out)}

    _pdf(inputs / "report.pdf", "The second, revised version of the report.", "A new page.")
    log = _run(inputs, out)
    assert f"report.pdf {CHANGED}" in log
    assert "other.pdf: already done" in log

    texts = _texts(out)
    assert set(texts) == {"report.pdf", "other.pdf"}
    assert "second, revised version" in texts["report.pdf"] and "first" not in texts["report.pdf"]
    markdown = (out / "markdown" / "report.pdf.md").read_text()
    assert "second, revised version" in markdown and "first version" not in markdown
    rows = _parquet_rows(out)
    assert Counter(Path(r["source"]).name for r in rows) == {"report.pdf": 1, "other.pdf": 1}
    assert "second, revised" in next(r["text"] for r in rows if r["source"].endswith("report.pdf"))
    assert {r["id"] for r in rows} == {r["id"] for r in results(out)}
    assert len(old_ids & {r["id"] for r in rows}) == 1  # other.pdf kept its id
    status = status_json(out)
    assert status["documents"] == {"ok": 2}
    assert status["pages"] == {"ok": 3}
    # No checkpoint, done marker or figure of the old document is left behind.
    assert len(list((out / ".ocrflow" / "done").glob("*.json"))) == 2
    assert not list((out / ".ocrflow" / "pages").glob("*/*"))

    again = _run(inputs, out)  # nothing changed since: nothing converted
    assert CHANGED not in again and again.count(": already done") == 2


def test_same_size_change_is_seen_and_a_touch_is_not(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(inputs, out)
    before = json.loads(_done_marker(out, "other.pdf").read_text())
    size = (inputs / "report.pdf").stat().st_size
    _pdf(inputs / "report.pdf", "The FIRST version of the report.")  # same length
    assert (inputs / "report.pdf").stat().st_size == size
    stamp = (inputs / "other.pdf").stat()
    os.utime(inputs / "other.pdf", ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))

    log = _run(inputs, out)
    assert f"report.pdf {CHANGED}" in log and f"other.pdf {CHANGED}" not in log
    assert "FIRST version" in _texts(out)["report.pdf"]
    assert json.loads(_done_marker(out, "other.pdf").read_text()) == before  # not redone
    assert len(_parquet_rows(out)) == 2


def test_a_changed_split_document_is_split_afresh(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _pdf(inputs / "long.pdf", *(f"Old page {n}." for n in range(5)))
    _run(inputs, out, "--split-pages", "2")
    _pdf(inputs / "long.pdf", *(f"New page {n}." for n in range(3)))
    _run(inputs, out, "--split-pages", "2")
    text = _texts(out)["long.pdf"]
    assert "New page 2." in text and "Old page" not in text
    assert status_json(out)["pages"] == {"ok": 5}  # 3 of long.pdf, one each of the others
    ranges = list((out / ".ocrflow" / "ranges").glob("*.json"))
    assert len(ranges) == 1 and len(json.loads(ranges[0].read_text())) == 2


def _done_marker(out: Path, name: str) -> Path:
    for path in (out / ".ocrflow" / "done").glob("*.json"):
        if json.loads(path.read_text())["rel"] == name:
            return path
    raise AssertionError(f"no done marker for {name}")


@pytest.mark.s3
def test_a_changed_object_in_s3_is_converted_again(
    s3_endpoint: S3Endpoint,
    tmp_path: Path,
) -> None:
    bucket = s3_endpoint.new_bucket()
    client = s3_endpoint.client()
    first = make_examples.text_pdf([["Stored text, version one."]])
    second = make_examples.text_pdf([["Stored text, version TWO."]])
    assert len(first) == len(second)  # only the ETag tells them apart
    client.put_object(Bucket=bucket, Key="in/doc.pdf", Body=first)
    client.put_object(Bucket=bucket, Key="in/keep.pdf", Body=first)
    out, source = tmp_path / "out", f"s3://{bucket}/in/"
    env = s3_endpoint.env
    assert ocrflow("run", source, "-o", str(out), *FORMATS, env=env).returncode == 0
    client.put_object(Bucket=bucket, Key="in/doc.pdf", Body=second)
    again = ocrflow("run", source, "-o", str(out), *FORMATS, env=env)
    assert again.returncode == 0, again.stderr
    assert f"doc.pdf {CHANGED}" in again.stderr and "keep.pdf: already done" in again.stderr
    assert "version TWO" in _texts(out)["doc.pdf"]
    assert len(_parquet_rows(out)) == 2
