"""One URI policy, parsed not matched: with ``--allow-uri-prefix http://HOST/docs`` no
encoding, dot segment, userinfo, host or port trick reaches ``/secret.pdf`` (each is a
422), a redirect from the allowed host is never followed to another host, and a prefix
whose scheme has no installed backend stops ``ocrflow serve`` at start-up."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.integration.serve_helpers import TOKEN_A, Served, auth, free_port, serving, wait_status
from tests.security.access_helpers import CountingServer, everything_said, text_pdf

pytestmark = pytest.mark.slow

SECRET = "SECRETOUTSIDEPREFIX"
ELSEWHERE = "SECRETOTHERHOST"
PUBLIC = "PUBLICALLOWEDDOC"


@dataclass
class Setting:
    service: Served
    allowed: CountingServer
    other: CountingServer

    @property
    def docs(self) -> str:
        return self.allowed.url + "/docs"


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setting]:
    pdf = {"Content-Type": "application/pdf"}
    with CountingServer({"/secret.pdf": (200, pdf, text_pdf(ELSEWHERE))}) as other:
        routes = {
            "/docs/a.pdf": (200, pdf, text_pdf(PUBLIC)),
            "/secret.pdf": (200, pdf, text_pdf(SECRET)),
            "/docs/out": (302, {"Location": other.url + "/secret.pdf"}, b""),
            "/docs/up": (302, {"Location": "/secret.pdf"}, b""),
            "/docs/folder/": (200, {"Content-Type": "text/html"},
                              f'<a href="{other.url}/secret.pdf">x</a> <a href="../../secret.pdf">'
                              f'y</a> <a href="a.pdf">z</a>'.encode()),
        }  # fmt: skip
        with CountingServer(routes) as allowed:
            root = tmp_path_factory.mktemp("uris") / "root"
            prefix = allowed.url + "/docs"
            with serving(root, "--workers", "1", "--allow-uri-prefix", prefix) as service:
                yield Setting(service, allowed, other)


def _encodings(docs: str, port: int) -> list[str]:
    host = docs.split("/")[2]
    return [
        f"{docs}/%2e%2e/secret.pdf", f"{docs}/.%2e/secret.pdf", f"{docs}/..%2fsecret.pdf",
        f"{docs}/%2E%2E/secret.pdf", f"{docs}/%2e./secret.pdf", f"{docs}/..%5csecret.pdf",
        f"{docs}/..%5Csecret.pdf", f"{docs}/%252e%252e/secret.pdf", f"{docs}/..%252fsecret.pdf",
        f"{docs}/../secret.pdf", f"{docs}/./../secret.pdf", f"{docs}/..;/secret.pdf",
        f"{docs}//../secret.pdf", f"{docs}/\\..\\secret.pdf", f"{docs}/%c0%ae%c0%ae/secret.pdf",
        f"{docs}/\uff0e\uff0e/secret.pdf", f"http://x@{host}/docs/a.pdf",
        f"http://{host}@127.0.0.2/docs/a.pdf", f"http://{host}:1@127.0.0.1/docs/a.pdf",
        f"http://127.0.0.1:{port + 1}/docs/a.pdf", f"https://{host}/docs/a.pdf",
        f"http://localhost:{port}/docs/a.pdf", f"http://127.0.0.1.:{port}/docs/a.pdf",
        f"http://{host}/DOCS/a.pdf", f"http://{host}/docsx/a.pdf", f"http://{host}/secret.pdf",
        f"{docs}/a.pdf#x", f"{docs}/a::b.pdf", f"{docs}::file:///etc/passwd",
        f"http://[::1]:{port}/docs/a.pdf", f"http://[::ffff:127.0.0.1]:{port}/docs/a.pdf",
        "http://[::1/docs/a.pdf", f"{docs}/a.pdf\n", f" {docs}/a.pdf", f"{docs}/a%00.pdf",
    ]  # fmt: skip


def _post(setting: Setting, uri: str) -> httpx.Response:
    return httpx.post(
        setting.service.url + "/v1/jobs", json={"uris": [uri]}, headers=auth(TOKEN_A), timeout=60
    )


def test_every_encoding_and_authority_trick_is_422(setting: Setting) -> None:
    port = int(setting.allowed.url.rsplit(":", 1)[1])
    for uri in _encodings(setting.docs, port):
        answer = _post(setting, uri)
        assert answer.status_code == 422, (uri, answer.status_code, answer.text)
        assert "uris" in answer.json()["detail"]
    assert setting.allowed.hits["/secret.pdf"] == 0
    assert setting.other.total == 0


def test_an_allowed_uri_is_read(setting: Setting) -> None:
    answer = _post(setting, setting.docs + "/a.pdf")
    assert answer.status_code == 201, answer.text
    with httpx.Client(base_url=setting.service.url, timeout=60) as client:
        job = wait_status(client, answer.json()["id"], {"done", "failed"}, timeout=120)
        assert job["documents"] == {"ok": 1}, job
        assert PUBLIC in everything_said(client, job["id"], TOKEN_A)


@pytest.mark.parametrize("path", ["/docs/out", "/docs/up"])
def test_a_redirect_is_never_followed(setting: Setting, path: str) -> None:
    answer = _post(setting, setting.allowed.url + path)
    assert answer.status_code in {201, 422}, answer.text
    if answer.status_code == 201:  # planned: the document must fail, unread
        with httpx.Client(base_url=setting.service.url, timeout=60) as client:
            job = wait_status(client, answer.json()["id"], {"done", "failed"}, timeout=120)
            said = everything_said(client, job["id"], TOKEN_A)
        assert job["status"] == "failed", job
        assert SECRET not in said and ELSEWHERE not in said
    assert setting.allowed.hits[path] >= 1  # asked, and its answer not followed
    assert setting.other.total == 0
    assert setting.allowed.hits["/secret.pdf"] == 0


def test_a_listing_names_nothing_outside_the_prefix(setting: Setting) -> None:
    answer = _post(setting, setting.docs + "/folder/")
    if answer.status_code == 201:
        with httpx.Client(base_url=setting.service.url, timeout=60) as client:
            job = wait_status(client, answer.json()["id"], {"done", "failed"}, timeout=120)
            said = everything_said(client, job["id"], TOKEN_A)
        assert SECRET not in said and ELSEWHERE not in said
    else:
        assert answer.status_code == 422, answer.text
    assert setting.other.total == 0
    assert setting.allowed.hits["/secret.pdf"] == 0


def test_a_prefix_without_an_installed_backend_stops_serve(tmp_path: Path) -> None:
    # A plain install: ``aiohttp`` (fsspec's HTTP backend) cannot be imported.
    code = (
        "import sys; sys.modules['aiohttp'] = None\n"
        "from ocrflow.cli import main\n"
        "sys.argv = ['ocrflow'] + sys.argv[1:]\n"
        "main()\n"
    )
    prefix = "http://127.0.0.1:9/docs"
    command = [sys.executable, "-c", code, "serve", "--root", str(tmp_path / "root"),
               "--port", str(free_port()), "--allow-uri-prefix", prefix]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "no fsspec backend for http://" in done.stderr and "aiohttp" in done.stderr
    assert "pip install 'ocrflow[http]'" in done.stderr
    assert "Traceback" not in done.stderr
