"""Ray Data on a local Ray (2 CPUs): ``DocumentConverter`` in ``map_batches`` gives the ids,
statuses and Markdown of ``ocrflow run`` over the same folder, a corrupt file is a failed
row of a job that completes, and the README's example runs as written."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ocrflow.document import Document
from ocrflow.sinks.results import results
from tests.integration.ray_clusters import one_ray_cluster, until_ray_starts  # noqa: F401
from tests.needs import REPO, need

from .cli_helpers import ocrflow

pytestmark = pytest.mark.slow
need(
    "ray",
    importlib.util.find_spec("ray") is not None,
    "Ray is not installed: pip install 'ocrflow[ray]'",
)

RAY_ENV = {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "RAY_DATA_DISABLE_PROGRESS_BARS": "1"}

#: The driver: a local Ray of 2 CPUs, rows through ``map_batches`` in the form the issue
#: names (``fn_constructor_kwargs``, ``concurrency``), every row written as JSON.
DRIVER = """
import json, logging, sys
import ray
from ocrflow.ray_data import DocumentConverter

reader, location, rows_file, kwargs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
if reader == "binary":
    ds = ray.data.read_binary_files(location, include_paths=True)
else:
    ds = ray.data.read_parquet(location)
converted = ds.map_batches(
    DocumentConverter,
    fn_constructor_kwargs={"workers": 1, **json.loads(kwargs)},
    concurrency=1,
    batch_size=3,
)
with open(rows_file, "w") as handle:
    json.dump(converted.take_all(), handle)
"""


def _converted(reader: str, location: Path, tmp_path: Path, **kwargs: Any) -> list[dict[str, Any]]:
    """The rows ``DocumentConverter`` gives for the dataset at ``location``."""
    rows_file = tmp_path / "rows.json"
    done = _python(DRIVER, reader, str(location), str(rows_file), json.dumps(kwargs), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(rows_file.read_text())


def _python(
    code: str, *args: str, cwd: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return until_ray_starts(
        lambda: subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **RAY_ENV},
            check=False,
        )
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The six examples and a PDF whose body is garbage."""
    inputs = tmp_path / "in"
    shutil.copytree(REPO / "examples", inputs)
    (inputs / "corrupt.pdf").write_bytes(b"%PDF-1.4\n1 0 obj <</Type /Catalog garbage\n")
    return inputs


def test_rows_equal_ocrflow_run_and_a_corrupt_file_is_a_failed_row(
    folder: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run = ocrflow("run", str(folder), "-o", str(out), "--workers", "1", "-q")
    assert run.returncode == 1, run.stderr[-2000:]  # one document failed
    expected = {doc.metadata["rel"]: doc for doc in results(out)}
    assert len(expected) == 7

    converted = _converted("binary", folder, tmp_path, root=str(folder))
    rows = {Path(row["path"]).name: row for row in converted}

    assert set(rows) == set(expected)
    ok = {name for name, row in rows.items() if row["status"] == "ok"}
    assert ok == set(expected) - {"corrupt.pdf"} and len(ok) == 6
    for name in ok:
        row, doc = rows[name], expected[name]
        markdown = (out / "markdown" / f"{name}.md").read_text()
        assert row["markdown"] == markdown.removesuffix("\n"), name
        assert row["id"] == doc.id, name
        assert row["reason"] is None and row["n_pages"] == doc.page_count > 0
        _assert_document(row)

    corrupt, failed = rows["corrupt.pdf"], expected["corrupt.pdf"]
    assert corrupt["status"] == "failed" == str(failed.status)
    assert corrupt["reason"] == failed.reason and corrupt["reason"]
    assert corrupt["id"] == failed.id
    assert corrupt["markdown"] == "" and corrupt["n_pages"] == 0
    assert Document.from_dict(json.loads(corrupt["pages"])).message == failed.message


def _assert_document(row: dict[str, Any]) -> None:
    """``pages`` is the whole document as JSON, and says what the row says."""
    doc = Document.from_dict(json.loads(row["pages"]))
    assert (doc.id, str(doc.status), doc.page_count) == (row["id"], "ok", row["n_pages"])
    assert doc.markdown == row["markdown"]
    assert doc.pages and all(page.blocks for page in doc.pages if page.markdown)


def test_parquet_rows_of_images_equal_ocrflow_run_of_the_dataset(tmp_path: Path) -> None:
    examples = REPO / "examples"
    cells = {
        "photo": (examples / "invoice-photo.jpg").read_bytes(),
        "turned": (examples / "rotated-page.png").read_bytes(),
        "garbage": b"neither a PDF nor an image",
    }
    rows = [{"name": k, "image": {"bytes": v, "path": None}} for k, v in cells.items()]
    data = tmp_path / "data.parquet"
    pq.write_table(pa.Table.from_pylist(rows), data)
    out = tmp_path / "out"
    options = ("--dataset-column", "image", "--dataset-id-column", "name", "--workers", "1")
    run = ocrflow("run", str(data), "-o", str(out), *options, "-q")
    assert run.returncode == 1, run.stderr[-2000:]  # the garbage row failed
    expected = {doc.metadata["rel"]: doc for doc in results(out)}

    converted = _converted(
        "parquet", data, tmp_path, dataset_column="image", dataset_id_column="name"
    )
    by_id = {row["id"]: row for row in converted}
    assert set(by_id) == {doc.id for doc in expected.values()}
    for name in ("photo", "turned"):
        row, doc = by_id[expected[name].id], expected[name]
        assert (row["status"], row["markdown"]) == ("ok", doc.markdown) and doc.markdown
        _assert_document(row)
    garbage = by_id[expected["garbage"].id]
    assert (garbage["status"], garbage["reason"]) == ("failed", expected["garbage"].reason)
    assert garbage["path"] == "" and garbage["markdown"] == ""


def _readme_example() -> str:
    """The Python block of the README's "Ray Data" section."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Ray Data\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "no Python block in the README's Ray Data section"
    return found.group(1)


def test_readme_example_runs_as_written(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    done = _python(_readme_example(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    table = pq.read_table(tmp_path / "converted").to_pylist()
    names = sorted(p.name for p in (REPO / "examples").iterdir())
    assert sorted(Path(row["path"]).name for row in table) == names
    assert {row["status"] for row in table} == {"ok"}
    assert all(row["markdown"] for row in table)
    for name in names:  # what the example prints
        assert f"'path': 'examples/{name}', 'status': 'ok'" in done.stdout
