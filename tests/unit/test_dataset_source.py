from __future__ import annotations

import shutil
from pathlib import Path

import make_dataset
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ocrflow.errors import ConfigError, SourceError
from ocrflow.inputs.copies import RowFetcher
from ocrflow.inputs.dataset import (
    dataset_files,
    dataset_schema,
    iter_dataset_rows,
    iter_row_sources,
)
from ocrflow.inputs.dataset_files import is_dataset_input
from ocrflow.inputs.dataset_rows import RowCursor
from ocrflow.inputs.expand import expand_inputs
from ocrflow.inputs.source import RowRef, parse_row_uri, row_uri
from ocrflow.sinks.dataset_writeback import write_back
from ocrflow.storage.local import LocalStore
from ocrflow.storage.shards import ShardLimits

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_PDF = ROOT / "examples" / "born-digital.pdf"


@pytest.fixture(scope="module")
def image_parquet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    path = tmp_path_factory.mktemp("ds") / "pages.parquet"
    pngs = make_dataset.write_image_dataset(path, 200, row_group_size=8)
    return path, pngs


def test_rows_stream_with_ids_bytes_and_kinds(image_parquet: tuple[Path, list[bytes]]) -> None:
    path, pngs = image_parquet
    rows = list(iter_dataset_rows(str(path), id_column="id", batch_size=8))
    assert [r.row_id for r in rows] == [f"doc-{i:06d}" for i in range(200)]
    assert all(r.data == pngs[r.index % 4] and r.kind == "image" for r in rows)
    assert len({r.doc_id for r in rows}) == 200
    assert rows[7].columns["label"] == "page 3" and rows[7].shard == "pages.parquet"
    default = next(iter_dataset_rows(str(path)))
    assert default.row_id == "pages-0"


def test_memory_holds_one_batch_not_the_dataset(image_parquet: tuple[Path, list[bytes]]) -> None:
    path, _ = image_parquet
    pool = pa.default_memory_pool()
    peak = 0
    for _ in iter_dataset_rows(str(path), batch_size=8):
        peak = max(peak, pool.bytes_allocated())
    # 200 rows of ~70 kB; a row group is 8 rows. Loading it all would hold ~14 MB in Arrow.
    assert peak < path.stat().st_size / 5, (peak, path.stat().st_size)


def test_a_folder_streams_lazily_up_to_a_broken_shard(
    tmp_path: Path, image_parquet: tuple[Path, list[bytes]]
) -> None:
    shutil.copy(image_parquet[0], tmp_path / "a.parquet")
    (tmp_path / "b.parquet").write_bytes(b"PAR1 not really")
    (tmp_path / "README.md").write_text("a dataset card")
    assert is_dataset_input(str(tmp_path))
    rows = iter_dataset_rows(str(tmp_path), batch_size=4)
    assert [next(rows).row_id for _ in range(200)][-1] == "a-199"  # read before b fails
    with pytest.raises(pa.ArrowInvalid):
        next(rows)


def test_recognises_dataset_inputs(tmp_path: Path, image_parquet: tuple[Path, list[bytes]]) -> None:
    path, _ = image_parquet
    assert is_dataset_input(str(path))
    assert is_dataset_input(str(path.parent / "*.parquet"))
    assert is_dataset_input(f"file://{path}")
    assert not is_dataset_input(str(ROOT / "examples"))
    assert not is_dataset_input(str(EXAMPLE_PDF))
    assert not is_dataset_input(str(tmp_path / "missing.parquet"))


def test_save_to_disk_folder_with_pdf_bytes(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    pdf = EXAMPLE_PDF.read_bytes()
    table = {"key": ["a", "b", "c"], "pdf": [pdf, None, pdf], "n": [1, 2, 3]}
    datasets.Dataset.from_dict(table).save_to_disk(str(tmp_path / "saved"))
    assert is_dataset_input(str(tmp_path / "saved"))
    rows = list(iter_dataset_rows(str(tmp_path / "saved"), id_column="key", batch_size=2))
    assert [(r.row_id, r.kind, r.columns["n"]) for r in rows] == [
        ("a", "pdf", 1),
        ("b", "missing", 2),
        ("c", "pdf", 3),
    ]
    assert rows[0].data == pdf


def test_column_choice_errors_name_the_columns(tmp_path: Path) -> None:
    two = pa.table({"front": [b"\x89PNG\r\n\x1a\n"], "back": [b"%PDF-1.4"], "t": ["x"]})
    pq.write_table(two, tmp_path / "two.parquet")
    with pytest.raises(ConfigError, match="front, back"):
        next(iter_dataset_rows(str(tmp_path / "two.parquet")))
    assert next(iter_dataset_rows(str(tmp_path / "two.parquet"), column="back")).kind == "pdf"
    with pytest.raises(ConfigError, match=r"column 't' holds no image"):
        next(iter_dataset_rows(str(tmp_path / "two.parquet"), column="t"))
    with pytest.raises(ConfigError, match="no id column 'nope'"):
        next(iter_dataset_rows(str(tmp_path / "two.parquet"), column="back", id_column="nope"))
    pq.write_table(pa.table({"t": ["x"], "n": [1]}), tmp_path / "none.parquet")
    with pytest.raises(ConfigError, match=r"no image or binary column; columns: t \(string\)"):
        next(iter_dataset_rows(str(tmp_path / "none.parquet")))


def test_write_back_adds_markdown_and_keeps_the_image_feature(
    tmp_path: Path, image_parquet: tuple[Path, list[bytes]]
) -> None:
    datasets = pytest.importorskip("datasets")
    path, _ = image_parquet
    schema = dataset_schema(dataset_files(str(path)))
    rows = iter_dataset_rows(str(path), id_column="id")
    results = ((row, f"# {row.row_id}", "ok") for row in rows)
    written = write_back(results, LocalStore(tmp_path / "out"), schema=schema, worker="w")
    assert written == ["dataset/w-00000.parquet"]
    loaded = datasets.load_dataset(
        "parquet",
        data_files=str(tmp_path / "out" / written[0]),
        split="train",
        cache_dir=str(tmp_path / "hf"),
    )
    assert loaded.num_rows == 200
    assert type(loaded.features["image"]).__name__ == "Image"
    assert loaded[5]["markdown"] == "# doc-000005" and loaded[5]["ocr_status"] == "ok"
    assert loaded[5]["image"].size == (620, 877)

    small = ShardLimits(max_rows=64)
    again = write_back(
        ((row, "x", "ok") for row in iter_dataset_rows(str(path))),
        LocalStore(tmp_path / "out"),
        schema=schema,
        worker="w",
        limits=small,
    )
    assert again == [f"dataset/w-0000{n}.parquet" for n in range(4)]
    last = write_back(iter([]), LocalStore(tmp_path / "out"), schema=schema, worker="w")
    assert last == [] and not list((tmp_path / "out" / "dataset").glob("*.parquet"))


def test_row_uris_round_trip() -> None:
    ref = RowRef("s3://b/data #1", "train/part 0.parquet", 17, "a/b:c#row=x")
    assert parse_row_uri(row_uri(ref)) == ref
    assert parse_row_uri("/in/scan.pdf") is None
    assert parse_row_uri("/in/x#row=s.parquet:nope") is None


def test_row_sources_keep_ids_and_sizes_not_bytes(
    image_parquet: tuple[Path, list[bytes]],
) -> None:
    path, pngs = image_parquet
    sources = expand_inputs([str(path)], options=None)
    assert len(sources) == 200
    first = sources[0]
    assert (first.rel, first.kind, first.size) == ("pages-0", "image", len(pngs[0]))
    ref = parse_row_uri(first.uri)
    assert ref == RowRef(str(path), "pages.parquet", 0, "pages-0")
    by_id = list(iter_row_sources(str(path), id_column="id"))
    assert [s.rel for s in by_id[:2]] == ["doc-000000", "doc-000001"]


def test_cursor_reads_forward_and_reopens_only_to_go_back(
    image_parquet: tuple[Path, list[bytes]],
) -> None:
    path, pngs = image_parquet
    cursor = RowCursor(dataset_files(str(path)), "image", batch_size=4)
    for index in range(0, 200, 3):  # forward through all 25 row groups: one open
        assert cursor.fetch("pages.parquet", index) == pngs[index % 4]
        assert cursor.held_rows <= 4  # one small batch in memory, never the shard
    assert cursor.reopens == 0
    assert cursor.fetch("pages.parquet", 150) == pngs[150 % 4]  # backwards: reopen there
    assert cursor.reopens == 1
    assert cursor.fetch("pages.parquet", 151) == pngs[151 % 4]
    assert cursor.reopens == 1
    with pytest.raises(SourceError, match="no row 200"):
        cursor.fetch("pages.parquet", 200)
    with pytest.raises(SourceError, match="no shard"):
        cursor.fetch("other.parquet", 0)


def test_fetcher_writes_a_row_to_a_temporary_file(
    image_parquet: tuple[Path, list[bytes]],
) -> None:
    path, pngs = image_parquet
    fetcher = RowFetcher()
    uri = row_uri(RowRef(str(path), "pages.parquet", 5, "pages-5"))
    with fetcher.local_copy(uri) as local:
        assert Path(local).read_bytes() == pngs[1]
    assert not Path(local).exists()
    with fetcher.local_copy(str(EXAMPLE_PDF)) as plain:  # other URIs: as before
        assert plain == str(EXAMPLE_PDF)
    with pytest.raises(SourceError):
        fetcher.fetch(RowRef(str(path), "pages.parquet", 999, "x"))


def test_cursor_on_a_saved_dataset(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    pdf = EXAMPLE_PDF.read_bytes()
    datasets.Dataset.from_dict({"pdf": [pdf, None, pdf[:50]]}).save_to_disk(str(tmp_path / "s"))
    files = dataset_files(str(tmp_path / "s"))
    shard = Path(files.paths[0]).name
    cursor = RowCursor(files, "pdf", batch_size=1)
    assert [cursor.fetch(shard, i) for i in (0, 1, 2)] == [pdf, b"", pdf[:50]]
    assert cursor.fetch(shard, 0) == pdf and cursor.reopens == 1
