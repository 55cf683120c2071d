"""Shared by the access tests: PDFs whose text proves a read, everything a job tells its
owner, the API process's memory, and local HTTP servers that count what they are asked."""

from __future__ import annotations

import io
import json
import threading
import zipfile
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pypdfium2 as pdfium

from tests.integration.serve_helpers import EXAMPLES, auth


def text_pdf(text: str) -> bytes:
    """A born-digital one-page PDF saying ``text`` (read from its text layer, no OCR)."""
    import make_examples

    return bytes(make_examples.text_pdf([[text]]))


def born_digital_pdf(pages: int) -> bytes:
    """A PDF of ``pages`` copies of the born-digital example's first page."""
    source = pdfium.PdfDocument(EXAMPLES / "born-digital.pdf")
    target = pdfium.PdfDocument.new()
    target.import_pages(source, [0] * pages)
    sink = io.BytesIO()
    target.save(sink)
    return sink.getvalue()


def everything_said(client: httpx.Client, job_id: str, token: str) -> str:
    """The job's JSON, its JSONL results and its Markdown files, as one text."""
    parts = [json.dumps(client.get(f"/v1/jobs/{job_id}", headers=auth(token)).json())]
    parts.append(client.get(f"/v1/jobs/{job_id}/results", headers=auth(token)).text)
    zipped = client.get(f"/v1/jobs/{job_id}/results?format=markdown", headers=auth(token))
    if zipped.status_code == 200:
        with zipfile.ZipFile(io.BytesIO(zipped.content)) as archive:
            parts += [archive.read(n).decode(errors="replace") for n in archive.namelist()]
    return "\n".join(parts)


def rss_mb(pid: int) -> float:
    """Resident memory of a process, MB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


Route = tuple[int, dict[str, str], bytes]


class CountingServer:
    """An HTTP server on 127.0.0.1 answering GET/HEAD from ``routes`` (path → status,
    headers, body; anything else 404) and counting every request by path."""

    def __init__(self, routes: dict[str, Route] | None = None) -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        self.hits: Counter[str] = Counter()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, body: bool) -> None:
                server.hits[self.path] += 1
                status, headers, data = server.routes.get(self.path, (404, {}, b"not here"))
                self.send_response(status)
                for key, value in {"Content-Length": str(len(data)), **headers}.items():
                    self.send_header(key, value)
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer(True)

            def do_HEAD(self) -> None:
                self._answer(False)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def total(self) -> int:
        return sum(self.hits.values())

    def __enter__(self) -> CountingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
