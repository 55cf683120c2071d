"""An upload that is not a document is refused by name (422) by a real ``ocrflow serve``,
beside a PDF or alone, and leaves no job behind; a PDF alone is still taken."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .serve_helpers import EXAMPLES, TOKEN_A, Served, auth, serving

pytestmark = pytest.mark.slow
PDF = (EXAMPLES / "born-digital.pdf").read_bytes()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("uploads") / "root"
    with serving(root, "--workers", "0") as running:
        yield running


def _post(served: Served, files: list[tuple[str, bytes]]) -> httpx.Response:
    parts = [("files", (name, data, "application/octet-stream")) for name, data in files]
    return httpx.post(served.url + "/v1/jobs", files=parts, headers=auth(TOKEN_A), timeout=30)


def _jobs(served: Served) -> set[str]:
    root = Path(served.log_path).parent / "root" / "jobs"
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


@pytest.mark.parametrize("beside_a_pdf", [True, False], ids=["beside-a-pdf", "alone"])
def test_a_text_file_is_refused_by_name(served: Served, beside_a_pdf: bool) -> None:
    before = _jobs(served)
    files = [("a.pdf", PDF)] if beside_a_pdf else []
    answer = _post(served, [*files, ("notes.txt", b"plain words, not a document\n")])
    assert answer.status_code == 422, answer.text
    assert "notes.txt" in answer.json()["detail"]
    assert _jobs(served) == before  # nothing kept of a refused job


def test_documents_alone_are_taken(served: Served) -> None:
    answer = _post(served, [("a.pdf", PDF), ("scan", b"\x89PNG\r\n\x1a\n" + b"\0" * 64)])
    assert answer.status_code == 201, answer.text
