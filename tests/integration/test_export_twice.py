"""``ocrflow export`` into the same folder again replaces the earlier export (each document
once, whatever the formats), refuses a folder holding someone else's files unless
``--overwrite``, and names a file given as the folder instead of a traceback."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from ocrflow.sinks import DocumentMeta, FinishedDocument, JsonlSink
from ocrflow.storage.local import LocalStore
from ocrflow.types import DocStatus, DocumentResult, PageResult, Route
from ocrflow.workspace.state import Workspace
from tests.integration.cli_helpers import ocrflow

META = DocumentMeta("in/doc.pdf", "ab" * 32, 1_700_000_000.0, "fake", "fp")
IDS = [f"doc{n}" for n in range(6)]


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """An OUT with six finished documents (JSONL records and done markers)."""
    out = tmp_path / "out"
    store = LocalStore(out)
    sink, workspace = JsonlSink(store), Workspace(store)
    for doc_id in IDS:
        page = PageResult(1, f"text of {doc_id}", Route.ENGINE)
        result = DocumentResult(doc_id, f"/in/{doc_id}.pdf", DocStatus.OK, (page,), 1)
        sink.write(FinishedDocument(result, META))
        workspace.mark_done(result, rel=f"{doc_id}.pdf", content_sha256=META.content_sha256)
    return out


def _export(out: Path, dest: Path, fmt: str, *extra: str) -> None:
    done = ocrflow("export", str(out), str(dest), "--format", fmt, *extra)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("exported 6 documents"), done.stdout


def _parquet_ids(dest: Path) -> Counter[str]:
    """Ids as a reader of the folder's Parquet files sees them (every ``*.parquet`` in it)."""
    files = [str(p) for p in sorted(dest.rglob("*.parquet"))]
    return Counter(ds.dataset(files, format="parquet").to_table(columns=["id"])["id"].to_pylist())


def test_parquet_export_twice_holds_each_document_once(out: Path, tmp_path: Path) -> None:
    dest = tmp_path / "pq"
    _export(out, dest, "parquet")
    _export(out, dest, "parquet")
    assert _parquet_ids(dest) == Counter(IDS)
    assert sorted(p.name for p in dest.glob("*.parquet")) == ["part-00000.parquet"]


def test_hf_export_twice_and_after_parquet(out: Path, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    dest = tmp_path / "hf"
    _export(out, dest, "parquet")
    _export(out, dest, "hf")
    _export(out, dest, "hf")
    assert sorted(datasets.load_from_disk(str(dest))["id"]) == IDS
    assert not list(dest.glob("*.parquet"))  # the parquet export's shards were replaced
    _export(out, dest, "parquet")  # and back: the hf files go
    assert _parquet_ids(dest) == Counter(IDS)
    assert not (dest / "state.json").exists() and not list(dest.glob("*.arrow"))


def test_more_shards_then_fewer_leaves_no_stale_shard(out: Path, tmp_path: Path) -> None:
    dest = tmp_path / "pq"
    from ocrflow.stages.export import export
    from ocrflow.storage.shards import ShardLimits

    export(str(out), "parquet", str(dest), limits=ShardLimits(max_rows=2))
    assert len(list(dest.glob("*.parquet"))) == 3
    export(str(out), "parquet", str(dest))
    assert _parquet_ids(dest) == Counter(IDS)
    assert len(list(dest.glob("*.parquet"))) == 1


def test_a_folder_with_other_files_needs_overwrite(out: Path, tmp_path: Path) -> None:
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    (dest / "old.parquet").write_bytes(b"not ours")
    refused = ocrflow("export", str(out), str(dest), "--format", "parquet")
    assert refused.returncode == 2, refused.stderr
    assert "--overwrite" in refused.stderr and "old.parquet" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not list(dest.glob("part-*"))
    _export(out, dest, "parquet", "--overwrite")
    assert _parquet_ids(dest) == Counter(IDS)  # old.parquet was replaced
    assert (dest / "notes.txt").read_text() == "keep me"
    # notes.txt is still not export's: the next export into this folder asks again.
    assert ocrflow("export", str(out), str(dest)).returncode == 2


def test_export_to_a_file_path_is_a_clear_error(out: Path, tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("x")
    for fmt in ("hf", "parquet"):
        done = ocrflow("export", str(out), str(target), "--format", fmt)
        assert done.returncode == 2, (fmt, done.stderr)
        assert str(target) in done.stderr and "is a file" in done.stderr
        assert "Traceback" not in done.stderr
    assert target.read_text() == "x"
