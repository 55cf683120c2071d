"""Data never names server files: an uploaded Parquet whose Image structs carry a ``path``
and no ``bytes`` is read from its bytes only. Each such row fails ``path_not_allowed``,
unread, whatever it names (a secret, ``../..``, another tenant's upload, ``/dev/zero``, a
FIFO) and whether or not it exists; the service stays quick and small."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.integration.serve_helpers import TOKEN_A, TOKEN_B, Served, auth, serving, wait_status
from tests.security.access_helpers import everything_said, rss_mb, text_pdf

pytestmark = pytest.mark.slow

SECRET = "SECRETSERVERFILE"
TENANT_SECRET = "TENANTBSECRET"
PUBLIC = "PUBLICROWTEXT"
IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
FAST_S = 20.0  # generous: a refused row is never opened (it took 50 s on /dev/zero)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    root = tmp_path_factory.mktemp("rows") / "root"
    with serving(root, "--workers", "1") as running:  # default settings: no prefix
        yield running, root


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The server's files a row might name: a secret PDF, a FIFO, a missing path."""
    folder = tmp_path_factory.mktemp("server-files")
    secret = folder / "secret.pdf"
    secret.write_bytes(text_pdf(SECRET))
    fifo = folder / "pipe.pdf"
    os.mkfifo(fifo)
    return {"secret": secret, "fifo": fifo, "missing": folder / "nothing-here.pdf"}


def _parquet(rows: dict[str, tuple[bytes | None, str | None]]) -> bytes:
    table = pa.table({
        "name": list(rows),
        "image": pa.array([{"bytes": b, "path": p} for b, p in rows.values()], type=IMAGE),
    })  # fmt: skip
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _post_rows(
    client: httpx.Client, data: bytes, token: str = TOKEN_A
) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    answer = client.post(
        "/v1/jobs",
        files=[("files", ("rows.parquet", data, "application/octet-stream"))],
        data={"options": json.dumps({"dataset_id_column": "name"})},
        headers=auth(token),
    )
    return answer, time.monotonic() - started


def _tenant_b_upload(client: httpx.Client, root: Path) -> Path:
    files = [("files", ("b.pdf", text_pdf(TENANT_SECRET), "application/pdf"))]
    answer = client.post("/v1/jobs", files=files, headers=auth(TOKEN_B))
    assert answer.status_code == 201, answer.text
    path = root / "jobs" / answer.json()["id"] / "in" / "b.pdf"
    assert path.is_file()
    return path


def _assert_healthy(served: Served) -> None:
    assert httpx.get(served.url + "/health", timeout=10).status_code == 200
    assert rss_mb(served.proc.pid) < 1500, "the API process grew"


def test_rows_naming_server_files_fail_unread(
    served: tuple[Served, Path], files: dict[str, Path]
) -> None:
    service, root = served
    with httpx.Client(base_url=service.url, timeout=60) as client:
        tenant = _tenant_b_upload(client, root)
        hostile = {
            "absolute": str(files["secret"]),
            "relative": "../" * 30 + str(files["secret"]).lstrip("/"),
            "tenant": str(tenant),
            "dev_zero": "/dev/zero",
            "fifo": str(files["fifo"]),
            "missing": str(files["missing"]),
        }
        rows: dict[str, tuple[bytes | None, str | None]] = {"good": (text_pdf(PUBLIC), None)}
        rows |= {name: (None, path) for name, path in hostile.items()}
        rows["empty_bytes"] = (b"", str(files["secret"]))  # an empty ``bytes``: still no path
        answer, elapsed = _post_rows(client, _parquet(rows))
        assert answer.status_code == 201, answer.text
        assert elapsed < FAST_S
        job = wait_status(client, answer.json()["id"], {"done", "failed"}, timeout=120)
        assert job["documents"] == {"ok": 1, "failed": len(rows) - 1}, job
        failures = job["failures"]
        assert {f["reason"] for f in failures} == {"path_not_allowed"}, failures
        # The same answer whether the file exists, is a device, a FIFO or nothing at all.
        assert len({f["message"] for f in failures}) == 1, failures
        said = everything_said(client, job["id"], TOKEN_A)
    assert PUBLIC in said
    assert SECRET not in said and TENANT_SECRET not in said
    assert str(files["secret"]) not in said and str(tenant) not in said
    # Recorded with the run: a joining ``ocrflow worker --root`` reads under the same policy.
    recorded = json.loads(
        (root / "jobs" / job["id"] / "out" / ".ocrflow" / "config.json").read_text()
    )
    access = recorded["run"]["input"]["access"]
    assert access["restricted"] is True and access["upload_folders"], access
    _assert_healthy(service)


@pytest.mark.parametrize("target", ["absolute", "relative", "dev_zero", "fifo"])
def test_each_hostile_row_is_answered_quickly(
    served: tuple[Served, Path], files: dict[str, Path], target: str
) -> None:
    service, _ = served
    path = {
        "absolute": str(files["secret"]),
        "relative": "../" * 30 + str(files["secret"]).lstrip("/"),
        "dev_zero": "/dev/zero",
        "fifo": str(files["fifo"]),
    }[target]
    with httpx.Client(base_url=service.url, timeout=60) as client:
        answer, elapsed = _post_rows(client, _parquet({"row": (None, path)}))
        assert elapsed < FAST_S and answer.status_code in {201, 422}, answer.text
        if answer.status_code == 201:
            job = wait_status(client, answer.json()["id"], {"done", "failed"}, timeout=120)
            assert job["status"] == "failed" and job["documents"] == {"failed": 1}, job
            assert job["failures"][0]["reason"] == "path_not_allowed"
            assert SECRET not in everything_said(client, job["id"], TOKEN_A)
    _assert_healthy(service)


def test_a_corrupt_parquet_upload_is_a_4xx_with_its_message(served: tuple[Served, Path]) -> None:
    service, _ = served
    data = b"PAR1" + os.urandom(4096) + b"PAR1"
    with httpx.Client(base_url=service.url, timeout=60) as client:
        answer, _ = _post_rows(client, data)
        truncated, _ = _post_rows(client, _parquet({"good": (text_pdf(PUBLIC), None)})[:-40])
    for bad in (answer, truncated):
        assert 400 <= bad.status_code < 500, bad.text
        assert "dataset" in bad.json()["detail"], bad.text
    _assert_healthy(service)


def test_an_allowed_dataset_names_files_under_its_prefix_only(
    tmp_path: Path, files: dict[str, Path]
) -> None:
    data = tmp_path / "data"
    (data / "ds" / "img").mkdir(parents=True)
    (data / "ds" / "img" / "a.pdf").write_bytes(text_pdf(PUBLIC))
    (data / "ds" / "img" / "out.pdf").symlink_to(files["secret"])
    rows: dict[str, tuple[bytes | None, str | None]] = {
        "inside": (None, "img/a.pdf"),
        "dotdot": (None, "../../" * 10 + str(files["secret"]).lstrip("/")),
        "absolute": (None, str(files["secret"])),
        "link_out": (None, "img/out.pdf"),
        "dev_zero": (None, "/dev/zero"),
        "url": (None, "http://127.0.0.1:9/x.pdf"),
    }
    (data / "ds" / "rows.parquet").write_bytes(_parquet(rows))
    with (
        serving(tmp_path / "root", "--workers", "1", "--allow-uri-prefix", str(data)) as service,
        httpx.Client(base_url=service.url, timeout=60) as client,
    ):
        answer = client.post(
            "/v1/jobs",
            json={
                "uris": [str(data / "ds" / "rows.parquet")],
                "options": {"dataset_id_column": "name"},
            },
            headers=auth(TOKEN_A),
        )
        assert answer.status_code == 201, answer.text
        job = wait_status(client, answer.json()["id"], {"done", "failed"}, timeout=120)
        said = everything_said(client, job["id"], TOKEN_A)
        _assert_healthy(service)
    assert job["documents"] == {"ok": 1, "failed": len(rows) - 1}, job
    assert {f["reason"] for f in job["failures"]} == {"path_not_allowed"}, job["failures"]
    assert PUBLIC in said and SECRET not in said
