"""A slow fake vLLM and long PDFs: jobs of the job service that last long enough to be
interrupted (cancelled, deleted, killed) while they run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from tests.fakevllm.process import ServerHandle, running_server

from .serve_helpers import EXAMPLES

MODEL = "olmocr"


@pytest.fixture(scope="module")
def slow_engine() -> Iterator[ServerHandle]:
    """A fake vLLM that reads about 6 pages a second: jobs last long enough to interrupt."""
    flags = ("--reply-format", "olmocr", "--model", MODEL, "--pages-per-s", "6",
             "--max-num-seqs", "4")  # fmt: skip
    with running_server(*flags) as server:
        yield server


def engine_args(server: ServerHandle, *extra: str) -> list[str]:
    """``ocrflow serve`` flags for ``server`` (and ``extra``)."""
    return ["--engine", "openai", "--server", server.base_url, "--model", MODEL,
            "--recipe", "olmocr", "-q", *extra]  # fmt: skip


def long_pdf(path: Path, pages: int) -> Path:
    """A PDF of ``pages`` copies of the born-digital sample's first page."""
    source = pdfium.PdfDocument(EXAMPLES / "born-digital.pdf")
    target = pdfium.PdfDocument.new()
    target.import_pages(source, [0] * pages)
    target.save(path)
    return path
