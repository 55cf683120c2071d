"""Page previews shared fairly: token A's slow pages (a PDF of 150,000 vector paths a page,
converted through its text layer only so that nothing renders it until a preview does) do
not hold up token B's preview of a simple page; A gets 429 with ``Retry-After`` beyond its
renders at once; a page rendered once is served from the cache."""

from __future__ import annotations

import asyncio
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ocrflow.service.documents import PreviewBusy, PreviewLimits, PreviewRenderer
from tests.integration.serve_helpers import (
    EXAMPLES,
    TOKEN_A,
    TOKEN_B,
    Served,
    auth,
    serving,
    wait_status,
)

pytestmark = pytest.mark.slow
SLOW_PAGES = 4
JPEG = b"\xff\xd8\xff"


def vector_pdf(pages: int, paths: int = 150_000) -> bytes:
    """A PDF whose every page strokes ``paths`` lines (slow to render, small to send)."""
    lines = b"".join(
        b"%d %d m %d %d l S\n" % (i % 97 * 6, i % 89 * 9, i % 83 * 7, i % 79 * 10)
        for i in range(paths)
    )
    # Faint lines (they cover the page) under a few lines of text: not a blank page.
    text = b"".join(b"BT /F1 18 Tf 72 %d Td (Quarterly report, page of many lines) Tj ET\n"
                    % (700 - 30 * row) for row in range(10))  # fmt: skip
    ops = b"0.9 G\n" + lines + b"0 g\n" + text
    stream = zlib.compress(ops, 9)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode()]  # fmt: skip
    for i in range(pages):
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 << /Type /Font /Subtype /Type1 "
            f"/BaseFont /Helvetica >> >> >> /Contents {4 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream)
                       + stream + b"\nendstream")  # fmt: skip
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref,
    )  # fmt: skip
    return bytes(out)


def finished_document(client: httpx.Client, token: str, name: str, data: bytes) -> str:
    """Submit one PDF (text layer only: converting it renders nothing) and return the
    image URL prefix of its finished document."""
    files = [("files", (name, data, "application/pdf"))]
    options = {"options": '{"text_layer": "only"}'}
    job_id = client.post("/v1/jobs", files=files, data=options, headers=auth(token)).json()["id"]
    wait_status(client, job_id, {"done", "failed"}, token=token, timeout=120)
    [doc] = client.get(f"/v1/jobs/{job_id}/documents", headers=auth(token)).json()["documents"]
    return f"/v1/jobs/{job_id}/documents/{doc['id']}/pages"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("previews") / "root"
    with serving(root, "--workers", "1", "-q") as running:
        yield running


def test_a_slow_tenant_does_not_slow_another_tenants_preview(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=120) as client:
        slow = finished_document(client, TOKEN_A, "vectors.pdf", vector_pdf(SLOW_PAGES))
        simple = finished_document(client, TOKEN_B, "simple.pdf",
                                   (EXAMPLES / "born-digital.pdf").read_bytes())  # fmt: skip
        answers: list[httpx.Response] = []
        stop = threading.Event()

        def hammer(page: int) -> None:
            with httpx.Client(base_url=served.url, timeout=120) as own:
                while not stop.is_set():
                    answer = own.get(f"{slow}/{page}.jpg", headers=auth(TOKEN_A))
                    answers.append(answer)
                    if answer.status_code == 429:
                        time.sleep(0.2)

        threads = [threading.Thread(target=hammer, args=(p,)) for p in range(1, SLOW_PAGES + 1)]
        for thread in threads:
            thread.start()
        try:
            time.sleep(2)  # A's renders are under way
            started = time.monotonic()
            preview = client.get(f"{simple}/1.jpg", headers=auth(TOKEN_B))
            elapsed = time.monotonic() - started
            assert preview.status_code == 200 and preview.content.startswith(JPEG)
            assert elapsed < 10, elapsed  # it waited for none of A's slow pages
        finally:
            stop.set()
            for thread in threads:
                thread.join(180)
        refused = [a for a in answers if a.status_code == 429]
        assert refused, [a.status_code for a in answers]
        assert int(refused[0].headers["retry-after"]) >= 1
        assert set(refused[0].json()) == {"detail"}


def test_a_page_rendered_once_comes_from_the_cache(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=120) as client:
        slow = finished_document(client, TOKEN_A, "vectors1.pdf", vector_pdf(1))
        started = time.monotonic()
        first = client.get(f"{slow}/1.jpg", headers=auth(TOKEN_A))
        rendered_s = time.monotonic() - started
        started = time.monotonic()
        again = client.get(f"{slow}/1.jpg", headers=auth(TOKEN_A))
        cached_s = time.monotonic() - started
        assert first.status_code == again.status_code == 200
        assert again.content == first.content
        # Rendering the page takes seconds; the cached answer none of them.
        assert cached_s < min(1.0, rendered_s / 2), (rendered_s, cached_s)
        # Another token cannot reach the page, cached or not.
        assert client.get(f"{slow}/1.jpg", headers=auth(TOKEN_B)).status_code == 404


class FakePool:
    """Stands in for the render processes: counts renders, each one held until released."""

    def __init__(self) -> None:
        self.renders = 0
        self.release = asyncio.Event()

    async def render(self, job: Any) -> list[Any]:
        self.renders += 1
        await self.release.wait()

        class Page:
            image = type("Image", (), {"data": b"jpeg-of-%d" % job.pages[0]})()

        return [Page()]


def test_preview_renderer_limits_coalesces_and_caches() -> None:
    async def scenario() -> None:
        renderer = PreviewRenderer(PreviewLimits(per_owner=1, cache_bytes=20))
        pool = FakePool()
        renderer._pool = pool  # type: ignore[assignment]
        first = asyncio.ensure_future(renderer.render("a", ("j", "d", 1), "x.pdf", "pdf"))
        await asyncio.sleep(0)
        # The same page again waits for the render under way; another page is refused.
        same = asyncio.ensure_future(renderer.render("a", ("j", "d", 1), "x.pdf", "pdf"))
        with pytest.raises(PreviewBusy):
            await renderer.render("a", ("j", "d", 2), "x.pdf", "pdf")
        # Another token is not limited by the first one's render.
        other = asyncio.ensure_future(renderer.render("b", ("k", "d", 1), "y.pdf", "pdf"))
        await asyncio.sleep(0)
        pool.release.set()
        assert await first == await same == b"jpeg-of-1"
        assert await other == b"jpeg-of-1"
        assert pool.renders == 2
        # Cached: no render; the cache holds at most ``cache_bytes`` (oldest out first).
        assert await renderer.render("a", ("j", "d", 1), "x.pdf", "pdf") == b"jpeg-of-1"
        assert pool.renders == 2
        await renderer.render("a", ("j", "d", 3), "x.pdf", "pdf")
        assert pool.renders == 3
        # B's page, the least recently used, went out for it (20 bytes hold two pages).
        await renderer.render("b", ("k", "d", 1), "y.pdf", "pdf")
        assert pool.renders == 4
        # A client that hangs up keeps its place taken until the process is free again.
        pool.release.clear()
        hung = asyncio.ensure_future(renderer.render("c", ("l", "d", 1), "z.pdf", "pdf"))
        await asyncio.sleep(0)
        hung.cancel()
        with pytest.raises(PreviewBusy):
            await renderer.render("c", ("l", "d", 2), "z.pdf", "pdf")
        pool.release.set()
        await asyncio.sleep(0.01)
        assert await renderer.render("c", ("l", "d", 2), "z.pdf", "pdf") == b"jpeg-of-2"

    asyncio.run(scenario())
