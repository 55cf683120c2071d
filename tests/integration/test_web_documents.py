"""The web page's routes (``service/web.py``, ``service/metrics.py``) over a real run.

A real ``ocrflow run`` (text layer) converts a two-page PDF whose text holds raw HTML into a
job's folder. The routers, in a FastAPI app whose service state is a stand-in for the job
store (real tokens, a real SQLite job table), must list the document, give each page's route
and its Markdown as HTML with the raw HTML escaped, and render each page as a JPEG; unknown
ids, pages and tokens get 404/401; ``/metrics`` reads the job gauges from the table.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from PIL import Image

from ocrflow.observe.metrics import Metrics
from ocrflow.service import metrics as service_metrics
from ocrflow.service import web
from ocrflow.service.auth import TokenSet, hash_token
from ocrflow.service.db import Database, Job
from ocrflow.service.documents import PREVIEW_DIM, markdown_html
from ocrflow.service.layout import JobDir

from .cli_helpers import ocrflow

JOB = "0123456789abcdef0123456789abcdef"
TOKEN = "web-test-token"
LINES = [
    ["Quarterly report <script>alert(1)</script>", "Revenue grew in every region."],
    ["Second page heading", "Costs fell by a tenth."],
]


class StandInJobs:
    """What the routes use of the service's ``JobStore``: one job of one owner, a database."""

    def __init__(self, root: Path, db: Database) -> None:
        self.settings = SimpleNamespace(root=root)
        self.db = db

    def get(self, owner: str, job_id: str) -> object | None:
        return object() if owner == hash_token(TOKEN) and job_id == JOB else None


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A service root whose job ``JOB`` holds a real run of a two-page PDF."""
    import make_examples

    folder = tmp_path_factory.mktemp("web")
    pdf = folder / "report.pdf"
    pdf.write_bytes(make_examples.text_pdf(LINES))
    out = JobDir(folder, JOB).out
    done = ocrflow("run", str(pdf), "-o", str(out), "--text-layer", "only", "-q")
    assert done.returncode == 0, done.stderr
    return folder


@pytest.fixture(scope="module")
def client(root: Path) -> Iterator[TestClient]:
    database = Database(f"sqlite:///{root / 'jobs.db'}")
    database.migrate()
    app = FastAPI()
    app.state.service = SimpleNamespace(
        tokens=TokenSet(frozenset({hash_token(TOKEN)})),
        jobs=StandInJobs(root, database),
        scheduler=SimpleNamespace(metrics=Metrics()),
    )
    app.include_router(web.router)
    app.include_router(service_metrics.router)
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as test_client:
        yield test_client
    database.close()


def test_page_and_static_files(client: TestClient) -> None:
    index = client.get("/")
    assert index.status_code == 200
    assert 'type="file"' in index.text and "/static/app.js" in index.text
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/static/..%2Fweb.py").status_code == 404
    assert client.get("/static/index.html.bak").status_code == 404


def test_documents_and_pages(client: TestClient) -> None:
    listing = client.get(f"/v1/jobs/{JOB}/documents").json()["documents"]
    assert [(d["name"], d["status"], d["pages"]) for d in listing] == [("report.pdf", "ok", 2)]
    doc = client.get(f"/v1/jobs/{JOB}/documents/{listing[0]['id']}").json()
    pages = doc["page_list"]
    assert [(p["page"], p["route"], p["fallback"]) for p in pages] == [
        (1, "text_layer", False),
        (2, "text_layer", False),
    ]
    assert "Revenue grew" in pages[0]["html"] and "Costs fell" in pages[1]["html"]
    assert "&lt;script&gt;" in pages[0]["html"] and "<script>" not in pages[0]["html"]


def test_page_images_are_small_jpegs(client: TestClient) -> None:
    doc_id = client.get(f"/v1/jobs/{JOB}/documents").json()["documents"][0]["id"]
    for page in (1, 2):
        answer = client.get(f"/v1/jobs/{JOB}/documents/{doc_id}/pages/{page}.jpg")
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "image/jpeg"
        image = Image.open(io.BytesIO(answer.content))
        assert image.format == "JPEG" and max(image.size) == PREVIEW_DIM
    assert client.get(f"/v1/jobs/{JOB}/documents/{doc_id}/pages/3.jpg").status_code == 404


def test_refusals(client: TestClient) -> None:
    doc_id = client.get(f"/v1/jobs/{JOB}/documents").json()["documents"][0]["id"]
    other = "f" * 32
    assert client.get(f"/v1/jobs/{other}/documents").status_code == 404
    assert client.get(f"/v1/jobs/{JOB}/documents/{'0' * 16}").status_code == 404
    assert client.get(f"/v1/jobs/{JOB}/documents/..%2F..%2Fjob").status_code == 404
    url = f"/v1/jobs/{JOB}/documents/{doc_id}/pages/1.jpg"
    assert client.get(url, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get(url, headers={"Authorization": ""}).status_code == 401


def test_metrics_route(client: TestClient) -> None:
    answer = client.get("/metrics")
    assert answer.status_code == 200
    assert "ocrflow_engine_requests_in_flight 0.0" in answer.text


def test_markdown_is_made_safe() -> None:
    html = markdown_html(
        "# T\n\n<img src=x onerror=alert(1)>\n\n[x](javascript:alert(1))\n\n![f](a.png)"
    )
    assert "<img" not in html and "&lt;img" in html
    assert 'href="javascript' not in html
    assert '<span class="figure">[figure: f]</span>' in html


def test_job_gauges_from_the_database(client: TestClient) -> None:
    rows = [("queued", 0, 12), ("running", 5, 20), ("done", 7, 7), ("running", 1, 2)]
    with client.app.state.service.jobs.db.session() as session:  # type: ignore[attr-defined]
        for n, (status, done, total) in enumerate(rows):
            session.add(
                Job(id=f"{n:032x}", status=status, pages_done=done, pages_total=total, created=n)
            )
    text = client.get("/metrics").text
    assert 'ocrflow_jobs{status="running"} 2.0' in text
    assert 'ocrflow_jobs{status="cancelled"} 0.0' in text
    assert "ocrflow_queue_pages 28.0" in text  # 12 + 15 + 1: done jobs left out
