"""A command whose optional extra is not installed exits 2 with the one ``pip install
'ocrflow[extra]'`` line that fixes it: never a traceback, and nothing converted.

Each test runs the real ``ocrflow`` command in a subprocess in which the extra's package
cannot be imported (a finder on ``sys.meta_path`` says it is not there, as in a core
install); tests/integration/test_core_install.py does the same in a real core venv.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ocrflow.errors import ConfigError, MissingExtra, require

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# Hides the packages named in argv[1] (comma-separated), then runs ``ocrflow`` with the rest.
_WITHOUT = """
import runpy, sys
hidden = set(sys.argv[1].split(","))
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Hide())
sys.argv = ["ocrflow", *sys.argv[2:]]
runpy.run_module("ocrflow.cli", run_name="__main__")
"""


def _ocrflow_without(hidden: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT, hidden, *args],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip


def _refused(done: subprocess.CompletedProcess[str], extra: str) -> str:
    """The error line, after checking the exit code and that there is no traceback."""
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if f"pip install 'ocrflow[{extra}]'" in line]
    assert lines, done.stderr[-2000:]
    return lines[0]


def test_format_parquet_without_pyarrow(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _ocrflow_without(
        "pyarrow", "run", str(EXAMPLES / "scanned.pdf"), "-o", str(out),
        "--format", "markdown,parquet",
    )  # fmt: skip
    line = _refused(done, "parquet")
    assert "--format parquet" in line and "pyarrow" in line
    assert not list(out.glob("markdown/*")), "a document was converted"


def test_format_pdf_without_pikepdf(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _ocrflow_without(
        "pikepdf", "run", str(EXAMPLES / "scanned.pdf"), "-o", str(out),
        "--format", "markdown,pdf",
    )  # fmt: skip
    line = _refused(done, "pdf")
    assert "--format pdf" in line and "pikepdf" in line
    assert not list(out.glob("markdown/*")), "a document was converted"


def test_a_dataset_input_without_pyarrow(tmp_path: Path) -> None:
    dataset = tmp_path / "rows.parquet"
    pdf = (EXAMPLES / "scanned.pdf").read_bytes()
    pq.write_table(pa.table({"id": ["a"], "pdf": [pdf]}), dataset)
    out = tmp_path / "out"
    line = _refused(_ocrflow_without("pyarrow", "run", str(dataset), "-o", str(out)), "parquet")
    assert str(dataset) in line
    assert not list(out.glob("markdown/*"))


def test_eval_without_rapidfuzz(tmp_path: Path) -> None:
    (tmp_path / "truth").mkdir()
    done = _ocrflow_without(
        "rapidfuzz", "eval", str(tmp_path / "run"), "--truth", str(tmp_path / "truth")
    )
    assert "ocrflow eval needs rapidfuzz" in _refused(done, "eval")


def test_an_http_input_without_aiohttp(tmp_path: Path) -> None:
    # Port 9 (discard): nothing is fetched, the backend is missing before any connection.
    done = _ocrflow_without(
        "aiohttp", "run", "http://127.0.0.1:9/doc.pdf", "-o", str(tmp_path / "out")
    )
    assert "http://" in _refused(done, "http")


def test_serve_without_fastapi(tmp_path: Path) -> None:
    done = _ocrflow_without("fastapi", "serve", "--root", str(tmp_path / "root"))
    assert "ocrflow serve needs fastapi" in _refused(done, "serve")
    assert not (tmp_path / "root" / "ocrflow.db").exists(), "the service started"


def test_run_with_markdown_and_jsonl_needs_no_extra(tmp_path: Path) -> None:
    # The core command with every optional package hidden: the run converts the document.
    hidden = (
        "pyarrow,pikepdf,lxml,rapidfuzz,fastapi,sqlalchemy,alembic,uvicorn,aiohttp,s3fs,ray,"
        "docling_core"
    )
    out = tmp_path / "out"
    done = _ocrflow_without(
        hidden, "run", str(EXAMPLES / "born-digital.pdf"), "-o", str(out),
        "--format", "markdown,jsonl",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (markdown,) = (out / "markdown").glob("*.md")
    assert markdown.name == "born-digital.pdf.md"
    assert len(markdown.read_text().split()) > 20, "no text came out"
    assert "Traceback" not in done.stderr


def test_require_names_the_extra_and_the_package() -> None:
    require("json", "pathlib", extra="none", feature="nothing")  # installed: no error
    with pytest.raises(MissingExtra) as caught:
        require("json", "ocrflow_no_such_module.sub", extra="serve", feature="ocrflow serve")
    error = caught.value
    assert isinstance(error, ConfigError)  # exits 2 wherever a ConfigError does
    assert (error.extra, error.package) == ("serve", "ocrflow_no_such_module")
    assert str(error) == (
        "ocrflow serve needs ocrflow_no_such_module, which is not installed: "
        "pip install 'ocrflow[serve]'"
    )
