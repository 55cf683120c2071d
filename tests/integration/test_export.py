"""``export``: an OUT's JSONL + done markers into Parquet shards or a save_to_disk folder."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ocrflow.errors import ConfigError
from ocrflow.sinks import DocumentMeta, FinishedDocument, JsonlSink
from ocrflow.sinks.parquet import ParquetSink, read_documents
from ocrflow.stages.export import export
from ocrflow.storage.local import LocalStore
from ocrflow.types import DocStatus, DocumentResult, Figure, PageResult, PageStatus, Route
from ocrflow.workspace.state import Workspace
from tests.integration.cli_helpers import ocrflow, results

ROOT = Path(__file__).resolve().parents[2]
META = DocumentMeta("in/doc.pdf", "cd" * 32, 1_700_000_000.0, "fake", "fp")


def _docs() -> list[DocumentResult]:
    pages = (
        PageResult(
            1,
            "Title\n\n<!--figure:0-->",
            Route.ENGINE,
            attributes={"k": 1},
            figures=(Figure(1, 0, "figure", (0.1, 0.2, 0.3, 0.4), b"png"),),
        ),
        PageResult(2, "", Route.BLANK),
        PageResult(3, "fallback text", Route.FALLBACK, PageStatus.OK, attributes={"r": "x"}),
    )
    return [
        DocumentResult("a", "/in/a.pdf", DocStatus.PARTIAL, pages, page_count=3),
        DocumentResult(
            "b", "/in/b.png", DocStatus.OK, (PageResult(1, "Ünïcode", Route.ENGINE),), 1
        ),
        DocumentResult("f", "/in/f.pdf", DocStatus.FAILED, reason="corrupt"),
    ]


def _out(tmp_path: Path) -> tuple[Path, LocalStore]:
    out = tmp_path / "out"
    store = LocalStore(out)
    jsonl, parquet = JsonlSink(store), ParquetSink(store, "w")
    workspace = Workspace(store)
    for doc in _docs():
        jsonl.write(FinishedDocument(doc, META))
        parquet.write(FinishedDocument(doc, META))
        workspace.mark_done(doc, rel=META.rel, content_sha256=META.content_sha256)
    parquet.close()
    # A record whose document never finished (no done marker) is not exported.
    jsonl.write(
        FinishedDocument(DocumentResult("u", "/in/u.pdf", DocStatus.OK, _docs()[1].pages, 1), META)
    )
    return out, store


def test_export_parquet_matches_the_sink_rows(tmp_path: Path) -> None:
    out, store = _out(tmp_path)
    report = export(str(out), "parquet", str(tmp_path / "pq"))
    assert report.rows == 2 and report.files == ["part-00000.parquet"]
    exported = pq.read_table(tmp_path / "pq" / "part-00000.parquet").to_pylist()
    sunk = read_documents(store).to_pylist()
    for row in (*exported, *sunk):
        row.pop("added")
    assert sorted(exported, key=lambda r: r["id"]) == sorted(sunk, key=lambda r: r["id"])
    a = next(r for r in exported if r["id"] == "a")
    assert [p["route"] for p in a["pages"]] == ["engine", "blank", "fallback"]
    assert a["figures"][0]["path"] == "figures/a/p1-0.png"
    assert a["figures"][0]["box"] == [0.1, 0.2, 0.3, 0.4]  # from the done marker's pages


def test_export_hf_opens_with_load_from_disk(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    out, _ = _out(tmp_path)
    export(str(out), "hf", str(tmp_path / "hf"))
    loaded = datasets.load_from_disk(str(tmp_path / "hf"))
    assert sorted(loaded["id"]) == ["a", "b"]
    parquet = pq.read_table(next((out / "parquet").glob("*.parquet")))
    by_id = {r["id"]: r for r in loaded}
    for row in parquet.to_pylist():
        assert by_id[row["id"]]["text"] == row["text"]
        assert by_id[row["id"]]["pages"] == row["pages"]


def test_export_refuses_a_folder_without_a_run(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no finished ocrflow documents"):
        export(str(tmp_path), "parquet", str(tmp_path / "pq"))


@pytest.mark.slow
def test_export_a_real_run_of_the_examples(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "out"
    run = ocrflow("run", str(ROOT / "examples"), "-o", str(out), "-q")
    assert run.returncode == 0, run.stderr
    for fmt, dest in (("parquet", "pq"), ("hf", "hf")):
        done = ocrflow("export", str(out), str(tmp_path / dest), "--format", fmt)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("exported 6 documents")
    texts = {r["id"]: r["text"] for r in results(out)}
    parquet = datasets.load_dataset(
        "parquet",
        data_files=str(tmp_path / "pq" / "*.parquet"),
        split="train",
        cache_dir=str(tmp_path / "cache"),
    )
    saved = datasets.load_from_disk(str(tmp_path / "hf"))
    assert dict(zip(parquet["id"], parquet["text"], strict=True)) == texts
    assert dict(zip(saved["id"], saved["text"], strict=True)) == texts
    assert len(texts) == 6
