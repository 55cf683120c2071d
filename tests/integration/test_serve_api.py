"""``ocrflow serve`` through a real uvicorn process: the acceptance flow on SQLite and on a
real PostgreSQL, auth and isolation, and hostile requests."""

from __future__ import annotations

import hashlib
import io
import json
import secrets
import socket
import sqlite3
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakevllm.process import ServerHandle, running_server
from tests.needs import need_postgres

from .serve_helpers import (
    EXAMPLES,
    SAMPLE_PDFS,
    TOKEN_A,
    TOKEN_B,
    CallbackReceiver,
    Postgres,
    auth,
    postgres_cluster,
    serving,
    submit_samples,
    wait_status,
)

MODEL = "olmocr"


@pytest.fixture(scope="module")
def fake_engine() -> Iterator[ServerHandle]:
    with running_server("--reply-format", "olmocr", "--model", MODEL, "--pages-per-s", "50") as s:
        yield s


def engine_args(server: ServerHandle) -> list[str]:
    return ["--engine", "openai", "--server", server.base_url, "--model", MODEL,
            "--recipe", "olmocr", "-q"]  # fmt: skip


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Postgres]:
    bin_dir = need_postgres()
    with postgres_cluster(bin_dir, tmp_path_factory.mktemp("pg") / "cluster") as cluster:
        yield cluster


def _acceptance(served_url: str, root: Path) -> str:
    with CallbackReceiver() as hook, httpx.Client(base_url=served_url, timeout=30) as client:
        job_id = submit_samples(
            client, callback_url=hook.url, options=json.dumps({"format": "markdown,jsonl"})
        )
        again = client.post(
            "/v1/jobs", json={"uris": []}, headers={**auth(TOKEN_A), "Idempotency-Key": "k1"}
        )
        assert again.status_code == 422  # no document: refused, and the key is not taken
        job = wait_status(client, job_id, {"done", "failed"})
        assert job["status"] == "done", job
        assert job["pages"]["done"] == job["pages"]["total"] > 0, job
        assert job["documents"] == {"ok": 3}
        lines = client.get(f"/v1/jobs/{job_id}/results", headers=auth(TOKEN_A)).text.splitlines()
        sources = sorted(Path(json.loads(line)["metadata"]["Source-File"]).name for line in lines)
        assert sources == sorted(SAMPLE_PDFS)
        archive = client.get(f"/v1/jobs/{job_id}/results?format=markdown", headers=auth(TOKEN_A))
        names = zipfile.ZipFile(io.BytesIO(archive.content)).namelist()
        assert sorted(names) == sorted(f"{n}.md" for n in SAMPLE_PDFS)
        # Auth and isolation: no token 401, a bad token 401, another token 404 everywhere.
        assert client.get(f"/v1/jobs/{job_id}").status_code == 401
        assert client.get(f"/v1/jobs/{job_id}", headers=auth("nope")).status_code == 401
        for method, path in [("GET", ""), ("GET", "/results"), ("POST", "/cancel"),
                             ("DELETE", "")]:  # fmt: skip
            answer = client.request(method, f"/v1/jobs/{job_id}{path}", headers=auth(TOKEN_B))
            assert answer.status_code == 404, (method, path)
        assert client.get("/v1/jobs", headers=auth(TOKEN_B)).json()["jobs"] == []
        listed = client.get("/v1/jobs?status=done", headers=auth(TOKEN_A)).json()["jobs"]
        assert [j["id"] for j in listed] == [job_id]
        wait_until(lambda: len(hook.bodies) >= 1)
        assert [b["id"] for b in hook.bodies] == [job_id]
        assert hook.bodies[0]["status"] == "done"
        assert "/v1/jobs" in client.get("/openapi.json").json()["paths"]
        assert client.get("/docs").status_code == 200
    return job_id


def wait_until(check: object, timeout: float = 15) -> None:
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


@pytest.mark.slow
def test_acceptance_on_sqlite(fake_engine: ServerHandle, tmp_path: Path) -> None:
    root = tmp_path / "root"
    args = [*engine_args(fake_engine), "--allow-callback-host", "127.0.0.1", "--workers", "2"]
    with serving(root, *args) as served:
        job_id = _acceptance(served.url, root)
        with httpx.Client(base_url=served.url, timeout=30) as client:
            headers = {**auth(TOKEN_A), "Idempotency-Key": "same"}
            files = [("files", ("a.pdf", (EXAMPLES / "born-digital.pdf").read_bytes()))]
            first = client.post("/v1/jobs", files=files, headers=headers)
            second = client.post("/v1/jobs", files=files, headers=headers)
            assert first.status_code == 201 and second.status_code == 200
            assert first.json()["id"] == second.json()["id"]
    _assert_no_token_at_rest(root)
    rows = sqlite3.connect(root / "ocrflow.db").execute("select id, owner from jobs").fetchall()
    assert (job_id, hashlib.sha256(TOKEN_A.encode()).hexdigest()) in rows


@pytest.mark.slow
def test_acceptance_on_postgres(
    fake_engine: ServerHandle, postgres: Postgres, tmp_path: Path
) -> None:
    url = postgres.new_database()
    root = tmp_path / "root"
    args = [*engine_args(fake_engine), "--db", url, "--allow-callback-host", "127.0.0.1"]
    with serving(root, *args) as served:
        job_id = _acceptance(served.url, root)
    rows = postgres.query(url, "select id, owner, status, pages_done, pages_total from jobs")
    assert rows == [(job_id, hashlib.sha256(TOKEN_A.encode()).hexdigest(), "done",
                     rows[0][3], rows[0][3])]  # fmt: skip
    dump = repr(postgres.query(url, "select * from jobs"))
    assert TOKEN_A not in dump and TOKEN_B not in dump
    assert not (root / "ocrflow.db").exists()


def _assert_no_token_at_rest(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            blob = path.read_bytes()
            assert TOKEN_A.encode() not in blob and TOKEN_B.encode() not in blob, path
    for log in root.parent.glob("serve-*.log"):
        assert TOKEN_A not in log.read_text(errors="replace")


# -- hostile requests ------------------------------------------------------------------
@pytest.fixture(scope="module")
def hostile(
    fake_engine: ServerHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("hostile") / "root"
    args = ["--max-upload-mb", "10", "--workers", "1", "--allow-uri-prefix", str(EXAMPLES)]
    with serving(root, *engine_args(fake_engine), *args) as s:
        yield s.url, root


def _job_dirs(root: Path) -> set[str]:
    return {p.name for p in (root / "jobs").iterdir()}


def test_hostile_names_stay_in_the_job_folder(hostile: tuple[str, Path]) -> None:
    url, root = hostile
    pdf = (EXAMPLES / "born-digital.pdf").read_bytes()
    names = ["../../../escape.pdf", "/etc/passwd.pdf", "a\x00b.pdf", "..", "C:\\x\\..\\y.pdf"]
    boundary = "hostileboundary"
    body = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="'.encode()
        + name.encode() + b'"\r\nContent-Type: application/pdf\r\n\r\n' + pdf + b"\r\n"
        for name in names
    ) + f"--{boundary}--\r\n".encode()  # fmt: skip
    headers = {**auth(TOKEN_A), "Content-Type": f"multipart/form-data; boundary={boundary}"}
    answer = httpx.post(url + "/v1/jobs", content=body, headers=headers, timeout=30)
    assert answer.status_code == 201, answer.text
    inputs = root / "jobs" / answer.json()["id"] / "in"
    stored = sorted(p.name for p in inputs.iterdir())
    assert stored == sorted(["escape.pdf", "passwd.pdf", "ab.pdf", "upload", "y.pdf"])
    assert not (root / "escape.pdf").exists() and not (root.parent / "escape.pdf").exists()
    assert all("\x00" not in p.name and ".." not in p.name for p in root.rglob("*"))


def _stream_upload(url: str, total: int, declare_length: bool) -> tuple[int, int]:
    """Send a multipart body of ``total`` bytes (generated, never held) over a raw socket;
    return (HTTP status, bytes sent before the server answered or closed)."""
    host, port = url.removeprefix("http://").split(":")
    boundary = "b0undary"
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="files"; '
            f'filename="big.pdf"\r\n\r\n').encode()  # fmt: skip
    lines = [
        "POST /v1/jobs HTTP/1.1", f"Host: {host}", f"Authorization: Bearer {TOKEN_A}",
        f"Content-Type: multipart/form-data; boundary={boundary}",
    ]  # fmt: skip
    lines.append(f"Content-Length: {total}" if declare_length else "Transfer-Encoding: chunked")
    chunk = b"%PDF-1.7 " + b"x" * (1 << 20)
    sent = 0
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        try:
            sock.sendall(_frame(head, declare_length))
            while sent < total:
                sock.setblocking(False)
                try:
                    if sock.recv(1, socket.MSG_PEEK):
                        break  # the server answered already
                except BlockingIOError:
                    pass
                sock.setblocking(True)
                sock.sendall(_frame(chunk, declare_length))
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        sock.setblocking(True)
        reply = sock.recv(4096).decode("latin-1")
    return int(reply.split(" ", 2)[1]), sent


def _frame(data: bytes, plain: bool) -> bytes:
    return data if plain else f"{len(data):x}\r\n".encode() + data + b"\r\n"


@pytest.mark.parametrize("declare_length", [True, False], ids=["content-length", "chunked"])
def test_two_gigabytes_against_a_10_mb_cap(hostile: tuple[str, Path], declare_length: bool) -> None:
    url, root = hostile
    before = _job_dirs(root)
    status, sent = _stream_upload(url, 2 << 30, declare_length)
    assert status == 413
    assert sent < 64 << 20  # refused early: at most a few MB past the cap went out
    assert _job_dirs(root) == before  # nothing left on disk
    assert sum(p.stat().st_size for p in root.rglob("big.pdf*")) == 0


@pytest.mark.parametrize(
    "content_type, body",
    [
        ("multipart/form-data", b"--x\r\n"),  # no boundary parameter
        ("multipart/form-data; boundary=x", b"--x\r\nContent-Disposition: form-data; name="
         b'"files"; filename="a.pdf"\r\n\r\n%PDF-1.7 truncated'),  # never ends
        ("multipart/form-data; boundary=x", b"garbage without any boundary at all"),
        ("multipart/form-data; boundary=x",
         b"--x\r\nContent-Disposition: attachment\r\n\r\nz\r\n--x--\r\n"),
        ("application/json", b"{not json"),
    ],
    ids=["no-boundary", "truncated", "garbage", "no-form-data", "bad-json"],
)  # fmt: skip
def test_malformed_bodies_are_400(
    hostile: tuple[str, Path], content_type: str, body: bytes
) -> None:
    url, root = hostile
    before = _job_dirs(root)
    answer = httpx.post(url + "/v1/jobs", content=body,
                        headers={**auth(TOKEN_A), "Content-Type": content_type})  # fmt: skip
    assert answer.status_code == 400, answer.text
    assert _job_dirs(root) == before


def test_unknown_option_is_422_naming_it(hostile: tuple[str, Path]) -> None:
    url, root = hostile
    before = _job_dirs(root)
    files = [("files", ("a.pdf", (EXAMPLES / "born-digital.pdf").read_bytes()))]
    data = {"options": json.dumps({"pages": "1", "frobnicate": 3})}
    answer = httpx.post(url + "/v1/jobs", files=files, data=data, headers=auth(TOKEN_A))
    assert answer.status_code == 422 and "frobnicate" in answer.json()["detail"]
    bad = httpx.post(url + "/v1/jobs", json={"uris": ["/etc/passwd"], "options": {"bogus": 1}},
                     headers=auth(TOKEN_A))  # fmt: skip
    assert bad.status_code == 422 and "bogus" in bad.json()["detail"]
    outside = httpx.post(url + "/v1/jobs", json={"uris": ["/etc/passwd"]}, headers=auth(TOKEN_A))
    assert outside.status_code == 422 and "uris" in outside.json()["detail"]
    assert _job_dirs(root) == before


def test_uris_only_under_allowed_prefixes(hostile: tuple[str, Path]) -> None:
    url, root = hostile
    before = _job_dirs(root)
    for uri in ["/etc/passwd", f"{EXAMPLES}/../pyproject.toml", f"{EXAMPLES}-x/a.pdf",
                "file:///etc/passwd", f"{EXAMPLES}/a\x00.pdf"]:  # fmt: skip
        answer = httpx.post(url + "/v1/jobs", json={"uris": [uri]}, headers=auth(TOKEN_A))
        assert answer.status_code == 422, (uri, answer.text)
    assert _job_dirs(root) == before
    ok = httpx.post(url + "/v1/jobs", json={"uris": [str(EXAMPLES / "born-digital.pdf")]},
                    headers=auth(TOKEN_A))  # fmt: skip
    assert ok.status_code == 201, ok.text
    with httpx.Client(base_url=url, timeout=30) as client:
        job = wait_status(client, ok.json()["id"], {"done", "failed"})
    assert job["status"] == "done" and job["documents"] == {"ok": 1}


def test_a_thousand_guessed_job_ids_are_all_404(hostile: tuple[str, Path]) -> None:
    url, _ = hostile
    with httpx.Client(base_url=url, headers=auth(TOKEN_A), timeout=30) as client:
        codes = {client.get(f"/v1/jobs/{secrets.token_hex(16)}").status_code for _ in range(1000)}
        odd = ["..%2F..%2Fetc", "%00", "x" * 300, "..%2Fjobs", "%2E%2E"]
        codes |= {client.get(f"/v1/jobs/{o}").status_code for o in odd}
    assert codes == {404}


def test_no_tokens_means_loopback_only(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "ocrflow.cli", "serve", "--root", str(tmp_path),
               "--host", "0.0.0.0", "--port", "1"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 2 and "refusing to listen on 0.0.0.0" in done.stderr
