from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ocrflow.sinks import DocumentMeta, FinishedDocument, JsonlSink
from ocrflow.sinks.parquet import ParquetSink, finalize_shards, read_documents
from ocrflow.storage.local import LocalStore
from ocrflow.storage.shards import ShardLimits, shard_keys
from ocrflow.types import DocStatus, DocumentResult, Figure, PageResult, PageStatus, Route

META = DocumentMeta("a/doc.pdf", "ab" * 32, 1_700_000_000.0, "fake", "fp")


def _doc(doc_id: str, pages: int = 2, status: DocStatus = DocStatus.OK) -> DocumentResult:
    results = tuple(
        PageResult(
            n,
            f"  {doc_id} page {n} Über\n<!--figure:0-->\n",
            Route.ENGINE if n % 2 else Route.TEXT_LAYER,
            attributes={"rotation": 90 if n == 2 else 0},
            figures=(Figure(n, 0, "chart", (0.0, 0.25, 0.5, 1.0), b"png"),),
        )
        for n in range(pages, 0, -1)  # out of order on purpose: rows sort pages
    )
    return DocumentResult(doc_id, f"/in/{doc_id}.pdf", status, results, page_count=pages)


def _jsonl(store: LocalStore) -> dict[str, dict]:
    records = {}
    for key in store.list("results"):
        record = json.loads(store.read_bytes(key) or b"")
        records[record["id"]] = record
    return records


def test_parquet_and_jsonl_hold_the_same_texts(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    committed: list[str] = []
    jsonl = JsonlSink(store)
    parquet = ParquetSink(store, "w1", limits=ShardLimits(max_rows=2), on_commit=committed.extend)
    docs = [_doc(f"d{i}", pages=i + 1) for i in range(5)]
    docs.append(DocumentResult("bad", "/in/bad.pdf", DocStatus.FAILED, reason="corrupt"))
    for doc in docs:
        jsonl.write(FinishedDocument(doc, META))
        parquet.write(FinishedDocument(doc, META))
    assert committed == ["d0", "d1", "d2", "d3", "bad"]  # d4 still buffered; bad has no row
    parquet.close()
    assert committed[-1] == "d4"
    assert shard_keys(store) == [f"parquet/w1-0000{n}.parquet" for n in range(3)]

    records = _jsonl(store)
    rows = {r["id"]: r for r in read_documents(store).to_pylist()}
    assert set(rows) == set(records) == {f"d{i}" for i in range(5)}
    for doc_id, row in rows.items():
        record = records[doc_id]
        assert row["text"] == record["text"]
        assert json.loads(row["metadata"]) == record["metadata"]
        spans = record["attributes"]["pdf_page_numbers"]
        assert [p["text"] for p in row["pages"]] == [record["text"][s:e] for s, e, _ in spans]
        assert [p["page"] for p in row["pages"]] == list(range(1, len(spans) + 1))
    page = rows["d3"]["pages"][1]
    assert (page["route"], page["status"]) == ("text_layer", "ok")
    assert json.loads(page["attributes"]) == {"rotation": 90}
    box = [0.0, 0.25, 0.5, 1.0]
    assert rows["d1"]["figures"] == [
        {"page": n, "path": f"figures/d1/p{n}-0.png", "box": box, "label": "chart"}
        | {"description": None}  # until the describe stage gives one
        for n in (1, 2)
    ]
    assert "![chart](figures/d1/p1-0.png)" in rows["d1"]["text"]


def test_loaders_read_the_shards(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    pandas = pytest.importorskip("pandas")
    store = LocalStore(tmp_path)
    sink = ParquetSink(store, "w", limits=ShardLimits(max_rows=3))
    for i in range(7):
        sink.write(FinishedDocument(_doc(f"id{i}"), META))
    sink.close()
    files = sorted(str(p) for p in (tmp_path / "parquet").glob("*.parquet"))
    loaded = datasets.load_dataset(
        "parquet", data_files=files, split="train", cache_dir=str(tmp_path / "hf")
    )
    assert sorted(loaded["id"]) == [f"id{i}" for i in range(7)]
    assert loaded[0]["pages"][0]["page"] == 1
    frame = pandas.concat(pandas.read_parquet(f) for f in files)
    assert len(frame) == 7 and frame["text"].str.contains("Über").all()


def test_shard_numbers_continue_after_a_restart_and_bytes_bound_shards(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    first = ParquetSink(store, "host/1", limits=ShardLimits(max_rows=100))
    first.write(FinishedDocument(_doc("a"), META))
    first.close()
    second = ParquetSink(store, "host/1", limits=ShardLimits(max_rows=100, max_bytes=1))
    second.write(FinishedDocument(_doc("b"), META))
    second.write(FinishedDocument(_doc("c"), META))
    second.close()  # nothing left: each row filled a shard
    assert shard_keys(store) == [f"parquet/host_1-0000{n}.parquet" for n in range(3)]


def test_typed_figures_keep_their_boxes(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    figure = {"path": "figures/x/p1-0.png", "box": [0.1, 0.2, 0.5, 0.6], "label": "diagram"}
    figure["description"] = None
    typed = Figure(1, 0, "diagram", (0.1, 0.2, 0.5, 0.6), b"png")
    page = PageResult(1, "text <!--figure:0-->", Route.ENGINE, PageStatus.OK, figures=(typed,))
    sink = ParquetSink(store, "w")
    sink.write(
        FinishedDocument(DocumentResult("x", "/in/x.pdf", DocStatus.PARTIAL, (page,), 3), META)
    )
    sink.close()
    [row] = read_documents(store).to_pylist()
    assert row["figures"] == [{"page": 1, **figure}]
    assert row["status"] == "partial"


def test_finalize_keeps_the_newest_row_and_only_done_ids(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    old = ParquetSink(store, "w", limits=ShardLimits(max_rows=2))
    for doc_id in ("a", "b", "c", "d"):  # shards 0: a b, 1: c d
        old.write(FinishedDocument(_doc(doc_id), META))
    old.close()
    # A resumed run redoes "b" (its done marker was lost) and "z"; rows carry a later "added".
    newer = DocumentMeta(META.rel, META.content_sha256, None, "fake", "fp")
    redo = ParquetSink(store, "w")
    redo.write(FinishedDocument(_doc("b", pages=3), newer))
    redo.write(FinishedDocument(_doc("z"), newer))
    redo.close()  # shard 2: b z
    before = {k: (tmp_path / k).stat().st_mtime_ns for k in shard_keys(store)}

    report = finalize_shards(store, done_ids={"a", "b", "c", "d"})  # z never got a marker
    assert report.rows_kept == 4 and report.rows_dropped == 2
    assert report.rewritten == ["parquet/w-00000.parquet", "parquet/w-00002.parquet"]
    assert (tmp_path / "parquet/w-00001.parquet").stat().st_mtime_ns == before[
        "parquet/w-00001.parquet"
    ]
    rows = [r for k in shard_keys(store) for r in pq.read_table(tmp_path / k).to_pylist()]
    assert sorted(r["id"] for r in rows) == ["a", "b", "c", "d"]
    assert len(next(r for r in rows if r["id"] == "b")["pages"]) == 3  # the redone row won

    again = finalize_shards(store, done_ids={"a", "b", "c", "d"})
    assert again.rewritten == again.deleted == [] and again.rows_dropped == 0


def test_finalize_deletes_a_shard_left_empty(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    sink = ParquetSink(store, "w", limits=ShardLimits(max_rows=1))
    sink.write(FinishedDocument(_doc("gone"), META))
    sink.write(FinishedDocument(_doc("kept"), META))
    report = finalize_shards(store, done_ids={"kept"})
    assert report.deleted == ["parquet/w-00000.parquet"]
    table = pq.read_table(io.BytesIO(store.read_bytes("parquet/w-00001.parquet") or b""))
    assert table["id"].to_pylist() == ["kept"]
