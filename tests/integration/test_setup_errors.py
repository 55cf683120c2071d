"""Set-up errors through the real CLI: one ``error:`` line naming the flag or the input,
exit 2 (or 3 for OUT), no traceback, and found before the first page is converted."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from tests.fakevllm.process import running_server
from tests.needs import need, need_tesseract
from tests.s3server import free_port, s3_env

from .cli_helpers import ocrflow


@pytest.fixture(scope="module")
def pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from make_examples import text_pdf

    path = tmp_path_factory.mktemp("pdf") / "page.pdf"
    path.write_bytes(text_pdf([["Set-up", "", "A page of plain words in its text layer."]]))
    return path


INTERNAL_NAMES = ("page_timeout_s", "lease_ttl_s", "max_pixels", "option kind", "workers:")


def _error(done: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """What a refused command said (asserting its exit code and that it said it plainly:
    an ``error:`` line, or the usage box of a value out of range)."""
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert "error" in done.stderr.lower(), done.stderr
    return " ".join(done.stderr.split())


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [
        ("--metrics-port", "99999", "--metrics-port"),
        ("--workers", "0", "--workers"),
        ("--workers", "-1", "--workers"),
        ("--page-timeout", "0", "--page-timeout"),
        ("--lease-ttl", "0", "--lease-ttl"),
        ("--engine", "nope", "--engine"),
        ("--max-pixels", "5", "--max-pixels"),
    ],
)
def test_a_bad_value_names_its_flag(
    pdf: Path, tmp_path: Path, flag: str, value: str, named: str
) -> None:
    said = _error(ocrflow("run", str(pdf), "-o", str(tmp_path / "out"), flag, value))
    assert named in said, said
    assert not any(name in said for name in INTERNAL_NAMES), said
    assert not (tmp_path / "out").exists()


def test_a_corrupt_parquet_input_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "rows.parquet"
    bad.write_bytes(b"PAR1 not really parquet PAR1")
    line = _error(ocrflow("run", str(bad), "-o", str(tmp_path / "out")))
    assert "rows.parquet" in line


@pytest.mark.parametrize("credentials", [True, False], ids=["unreachable", "no-credentials"])
def test_s3_without_credentials_or_endpoint_is_an_error(tmp_path: Path, credentials: bool) -> None:
    need("s3", importlib.util.find_spec("s3fs") is not None, "s3fs is not installed")
    env = s3_env(f"http://127.0.0.1:{free_port()}")  # nobody listens there
    if not credentials:
        env |= {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": ""}
    done = ocrflow("run", "s3://bucket/docs/", "-o", str(tmp_path / "out"), env=env,
                   timeout=120)  # fmt: skip
    line = _error(done)
    assert "s3://bucket/docs/" in line
    assert ("Could not connect" in line) if credentials else ("no credentials" in line)


def test_unknown_tesseract_languages_are_refused_up_front(pdf: Path, tmp_path: Path) -> None:
    need_tesseract()
    done = ocrflow("run", str(pdf), "-o", str(tmp_path / "out"), "--engine", "tesseract",
                   "--languages", "eng+xyz", "--text-layer", "off")  # fmt: skip
    line = _error(done)
    assert "--languages" in line and "xyz" in line
    assert not (tmp_path / "out").exists()  # before anything was planned or converted


def test_describe_without_a_model_is_refused_before_extract(pdf: Path, tmp_path: Path) -> None:
    done = ocrflow("run", str(pdf), "-o", str(tmp_path / "out"), "--stages", "extract,describe")
    assert "--describe-model" in _error(done)
    assert not (tmp_path / "out").exists()
    done = ocrflow("run", str(pdf), "-o", str(tmp_path / "out"), "--stages", "extract,describe",
                   "--describe-model", "some-vlm")  # fmt: skip
    assert "--describe-server" in _error(done)


def test_a_replica_serving_another_model_stops_the_run(pdf: Path, tmp_path: Path) -> None:
    flags = ("--pages-per-s", "200")
    with (
        running_server(*flags, "--model", "wanted") as good,
        running_server(*flags, "--model", "other") as other,
    ):
        done = ocrflow("run", str(pdf), "-o", str(tmp_path / "out"), "--engine", "openai",
                       "--server", good.base_url, "--server", other.base_url, "--model",
                       "wanted", "--recipe", "markdown", "-q", timeout=120)  # fmt: skip
    line = _error(done)
    assert other.base_url in line and "'other'" in line
