"""Slow and greedy clients: a request head or body sent a byte at a time is cut off, open
connections are capped, and a client that goes away is one log line, not a traceback."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.serve_helpers import TOKEN_A, Served, auth, serving

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("slow") / "root"
    args = ("--workers", "0", "--header-timeout", "2", "--body-timeout", "2",
            "--max-connections", "40")  # fmt: skip
    with serving(root, *args) as running:
        yield running


def _connect(served: Served) -> socket.socket:
    host, port = served.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    return sock


def _closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> float | None:
    """Send ``trickle`` a byte every 0.3 s until the server closes the connection; the time
    it took, or ``None`` when it was still open after ``seconds``."""
    start = time.monotonic()
    sock.settimeout(0.3)
    sent = 0
    while time.monotonic() - start < seconds:
        try:
            data = sock.recv(4096)
            if not data or b"HTTP/1.1 408" in data:
                return time.monotonic() - start
        except TimeoutError:
            pass
        except OSError:
            return time.monotonic() - start
        if sent < len(trickle):
            with contextlib.suppress(OSError):
                sock.sendall(trickle[sent : sent + 1])
            sent += 1
    return None


def test_a_head_sent_a_byte_at_a_time_is_cut_off(served: Served) -> None:
    head = b"GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    socks = [_connect(served) for _ in range(10)]
    try:
        took = [_closed_within(s, 20, head) for s in socks[:1]]
        assert took[0] is not None and took[0] < 8, took
        # The others sent nothing at all: closed too, well before 20 s.
        rest = [_closed_within(s, 10) for s in socks[1:]]
        assert all(t is not None for t in rest), rest
        # Meanwhile (and after) an ordinary client is answered.
        assert httpx.get(served.url + "/health", timeout=5).status_code == 200
    finally:
        for sock in socks:
            sock.close()
    assert "Traceback" not in served.log()


def test_a_body_sent_a_byte_at_a_time_is_cut_off(served: Served) -> None:
    sock = _connect(served)
    try:
        head = (
            "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {TOKEN_A}\r\nContent-Type: application/json\r\n"
            "Content-Length: 100000\r\n\r\n"
        ).encode()
        sock.sendall(head)
        took = _closed_within(sock, 30, b"[" * 200)
        assert took is not None and took < 15, took
    finally:
        sock.close()
    assert httpx.get(served.url + "/health", timeout=5).status_code == 200
    assert "Traceback" not in served.log()


def test_connections_beyond_the_cap_get_429(served: Served) -> None:
    socks: list[socket.socket] = []
    answers: list[bytes] = []
    try:
        for _ in range(60):
            sock = _connect(served)
            socks.append(sock)
        for sock in socks:
            sock.settimeout(0.05)
            with contextlib.suppress(TimeoutError, OSError):
                answers.append(sock.recv(4096))
        refused = [a for a in answers if a.startswith(b"HTTP/1.1 429")]
        assert refused, "no connection was refused past --max-connections 40"
        assert all(b"retry-after" in a.lower() for a in refused)
    finally:
        for sock in socks:
            sock.close()
    time.sleep(0.5)
    assert httpx.get(served.url + "/health", timeout=5).status_code == 200


def test_a_client_that_leaves_mid_upload_is_one_log_line(served: Served, tmp_path: Path) -> None:
    before = served.log().count("went away")
    for _ in range(5):
        sock = _connect(served)
        boundary = "b0undary"
        head = (
            "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {TOKEN_A}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
            "Content-Length: 1000000\r\n\r\n"
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; '
            'filename="a.pdf"\r\n\r\n%PDF-1.4\n'
        ).encode()
        sock.sendall(head + b"x" * 5000)
        time.sleep(0.2)
        sock.close()
    deadline = time.monotonic() + 10
    while served.log().count("went away") < before + 5 and time.monotonic() < deadline:
        time.sleep(0.2)
    log = served.log()
    assert log.count("went away") >= before + 5
    assert "Traceback" not in log and "Exception in ASGI" not in log
    # Nothing of the abandoned uploads is left in the jobs folder.
    with httpx.Client(base_url=served.url) as client:
        assert client.get("/v1/jobs", headers=auth(TOKEN_A)).json()["jobs"] == []
