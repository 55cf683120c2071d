"""Datasets as input, end to end: ``ocrflow run`` on Parquet and ``save_to_disk`` folders."""

from __future__ import annotations

import io
import json
from pathlib import Path

import make_dataset
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from .cli_helpers import ocrflow, results, status_json

ROOT = Path(__file__).resolve().parents[2]
PDF = (ROOT / "examples" / "born-digital.pdf").read_bytes()


def _white_png(size: tuple[int, int] = (300, 400)) -> bytes:
    buffer = io.BytesIO()
    Image.new("L", size, 255).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def pages() -> list[bytes]:
    """Two text pages (the engine reads them) and a white one (routed blank, no engine)."""
    return [*make_dataset.page_pngs(2, size=(500, 700)), _white_png()]


def _image_rows(pages: list[bytes]) -> list[dict[str, object]]:
    """12 rows: 2 text pages, 8 white pages, one PDF, one without data."""
    cells: list[bytes | None] = [pages[0], pages[1], *[pages[2]] * 8, PDF, None]
    return [
        {
            "id": f"row/{i:02d}" if i != 11 else "missing",
            "image": {"bytes": cell, "path": None} if cell is not None else None,
            "label": f"label {i}",
        }
        for i, cell in enumerate(cells)
    ]


def _write_back(out: Path) -> pa.Table:
    shards = sorted((out / "dataset").glob("*.parquet"))
    assert len(shards) == 1, shards
    return pq.read_table(shards[0])


@pytest.mark.slow
def test_parquet_of_pages_becomes_one_record_per_row(tmp_path: Path, pages: list[bytes]) -> None:
    maker = make_dataset
    data = tmp_path / "data.parquet"
    pq.write_table(pa.Table.from_pylist(_image_rows(pages), schema=maker.SCHEMA), data)
    out = tmp_path / "out"
    args = ("run", str(data), "-o", str(out), "--format", "markdown,jsonl,parquet",
            "--dataset-id-column", "id", "--workers", "1")  # fmt: skip
    first = ocrflow(*args)
    assert first.returncode == 1, first.stderr  # the row without data fails, with a reason
    records = results(out)
    by_row = {r["metadata"]["row_id"]: r for r in records}
    assert sorted(by_row) == sorted(f"row/{i:02d}" for i in range(11))
    assert "Page 1 of the sam" in by_row["row/00"]["text"]
    assert "Page 2 of the sam" in by_row["row/01"]["text"]
    assert by_row["row/03"]["metadata"]["routes"] == {"blank": 1}
    assert by_row["row/10"]["metadata"]["routes"] == {"text_layer": 3}
    assert by_row["row/10"]["metadata"]["dataset_row"] == 10
    # Markdown files are named by the row id (a "/" in it makes a folder, as for paths).
    assert (out / "markdown" / "row" / "00.md").read_text().startswith("Page 1 of the sam")
    assert len(list((out / "markdown").rglob("*.md"))) == 11
    failures = status_json(out)
    assert json.dumps(failures).count("empty") >= 1, failures
    back = _write_back(out)
    assert back.schema.names == ["id", "image", "label", "markdown", "ocr_status"]
    assert back.num_rows == 12 and back["id"].to_pylist()[-1] == "missing"
    statuses = back["ocr_status"].to_pylist()
    assert statuses == ["ok"] * 11 + ["failed"]
    markdown = back["markdown"].to_pylist()
    assert markdown[0].startswith("Page 1 of the sam") and markdown[11] is None
    assert back["label"].to_pylist() == [f"label {i}" for i in range(12)]
    assert json.loads(back.schema.metadata[b"huggingface"])["info"]["features"]["image"]
    run_rows = pq.read_table(out / "parquet").num_rows
    assert run_rows == 11

    again = ocrflow(*args)
    assert again.returncode == 1, again.stderr
    assert len(results(out)) == 11
    assert pq.read_table(out / "parquet").num_rows == 11
    assert _write_back(out).num_rows == 12  # replaced, not appended
    assert len(list((out / ".ocrflow" / "manifest").glob("*.jsonl"))) == 1


def test_save_to_disk_folder_and_dataset_column(tmp_path: Path, pages: list[bytes]) -> None:
    datasets = pytest.importorskip("datasets")
    white, pdf = pages[2], PDF
    table = {"key": ["a", "b"], "front": [white, white], "back": [pdf, pdf]}
    folder = tmp_path / "saved"
    value, image = datasets.Value, datasets.Image
    features = datasets.Features(
        {"key": value("string"), "front": image(), "back": value("binary")}
    )
    datasets.Dataset.from_dict(
        {**table, "front": [{"bytes": b, "path": None} for b in table["front"]]}, features=features
    ).save_to_disk(str(folder))
    out = tmp_path / "out"

    ambiguous = ocrflow("run", str(folder), "-o", str(out))
    assert ambiguous.returncode == 2
    assert "front, back" in ambiguous.stderr and "--dataset-column" in ambiguous.stderr
    wrong = ocrflow("run", str(folder), "-o", str(out), "--dataset-column", "nope")
    assert wrong.returncode == 2
    assert "no column 'nope'" in wrong.stderr and "key (string)" in wrong.stderr

    done = ocrflow("run", str(folder), "-o", str(out), "--dataset-column", "back",
                   "--dataset-id-column", "key", "--format", "jsonl,parquet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = {r["metadata"]["row_id"]: r for r in results(out)}
    assert sorted(records) == ["a", "b"]
    assert all(r["metadata"]["routes"] == {"text_layer": 3} for r in records.values())
    back = _write_back(out)
    assert back["key"].to_pylist() == ["a", "b"]
    assert back["markdown"].to_pylist() == [records["a"]["text"], records["b"]["text"]]
    # the write-back opens with ``datasets``, its image column still an Image
    loaded = datasets.load_dataset(
        "parquet", data_files=str(out / "dataset" / "*.parquet"), split="train",
        cache_dir=str(tmp_path / "hf"),
    )  # fmt: skip
    assert type(loaded.features["front"]).__name__ == "Image"
    assert loaded[1]["ocr_status"] == "ok"
