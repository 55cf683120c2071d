"""The ``txt`` format (``--sidecar``): a document's plain text as OCRmyPDF's sidecar has it,
pages apart by form feeds, Markdown markup taken away."""

from __future__ import annotations

from pathlib import Path

from ocrflow.config import OutputOptions
from ocrflow.config.builder import build_run_config
from ocrflow.document.model import page_from_result
from ocrflow.sinks import KNOWN_FORMATS, Outputs, SinkContext, figure_formats, format_sink
from ocrflow.sinks.base import DocumentMeta, FinishedDocument
from ocrflow.sinks.sidecar_text import SidecarTextSink, sidecar_text, txt_key
from ocrflow.storage.local import LocalStore
from ocrflow.types import (
    Block,
    BlockLabel,
    DocStatus,
    DocumentResult,
    Line,
    PageResult,
    PageStatus,
    Route,
)


def _engine_page() -> PageResult:
    """A page an engine read: a heading block without lines (Markdown), a paragraph with
    the engine's lines, a figure, a table, a footer."""
    blocks = (
        Block(BlockLabel.TITLE, "## Quarterly *report*", (0.1, 0.05, 0.9, 0.1)),
        Block(
            BlockLabel.TEXT,
            "Revenue rose\nby twelve\fpercent",
            (0.1, 0.2, 0.9, 0.3),
            lines=(
                Line("Revenue rose", (0.1, 0.2, 0.9, 0.24)),
                Line("by twelve\fpercent", (0.1, 0.25, 0.9, 0.3)),
            ),
        ),
        Block(BlockLabel.FIGURE, "<!--figure:0-->", (0.1, 0.35, 0.5, 0.6)),
        Block(BlockLabel.TABLE, "| a | b |\n|---|---|\n| 1 | **2** |", (0.1, 0.65, 0.9, 0.8)),
        Block(BlockLabel.PAGE_FOOTER, "Page 1", (0.4, 0.95, 0.6, 0.98)),
    )
    text = "\n\n".join(b.text for b in blocks)
    return PageResult(1, text, Route.ENGINE, blocks=blocks)


OWN_TEXT = "Own text, **first** paragraph\nstill first\n\n- second [one](x.png)"
PAGES = (
    _engine_page(),
    # Read from its own text layer, no blocks: its Markdown's paragraphs.
    PageResult(2, OWN_TEXT, Route.TEXT_LAYER),
    PageResult(3, "", Route.BLANK),
    PageResult(4, "", Route.FALLBACK, PageStatus.FAILED, error="engine down"),
    # Page 5 was outside --pages.
)
EXPECTED = (
    "Quarterly report\n\nRevenue rose\nby twelve percent\n\na b\n1 2\n\nPage 1\n"
    "\f"
    "Own text, first paragraph\nstill first\n\nsecond one\n"
    "\f"
    "\f"
    "\f"
    "[OCR skipped on page 5]"
)


def _document(rel: str, pages: tuple[PageResult, ...], page_count: int) -> FinishedDocument:
    status = DocStatus.OK if pages else DocStatus.FAILED
    result = DocumentResult("d" * 24, rel, status, pages, page_count)
    return FinishedDocument(result, DocumentMeta(rel, "0" * 64, None, "test", "fp"))


def test_pages_are_plain_text_apart_by_form_feeds_as_ocrmypdf_writes_them() -> None:
    text = sidecar_text([page_from_result(p) for p in PAGES], page_count=5)
    assert text == EXPECTED
    # As OCRmyPDF's: one form feed between pages, none after the last, so the Nth field
    # is page N.
    assert text.count("\f") == 4 and not text.endswith("\f")
    assert text.split("\f")[1].startswith("Own text")


def test_the_sink_writes_utf8_atomically_and_nothing_for_a_failed_document(
    tmp_path: Path,
) -> None:
    store = LocalStore(tmp_path / "out")
    sink = SidecarTextSink(store)
    sink.write(_document("a/scan.pdf", PAGES, 5))
    sink.write(_document("failed.pdf", (), 3))
    cyrillic = PageResult(1, "Привет мир", Route.ENGINE)
    sink.write(_document("b/ru.png", (cyrillic,), 1))
    sink.close()
    folder = tmp_path / "out" / "txt"
    written = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert written == ["a/scan.pdf.txt", "b/ru.png.txt"]  # nothing half-written left
    assert (tmp_path / "out" / txt_key("a/scan.pdf")).read_bytes() == EXPECTED.encode()
    assert (folder / "b/ru.png.txt").read_text("utf-8") == "Привет мир\n"


def test_txt_is_a_registered_reading_format_and_sidecar_adds_it() -> None:
    assert "txt" in KNOWN_FORMATS
    assert "txt" not in figure_formats(KNOWN_FORMATS)  # no figure links to rewrite
    assert isinstance(format_sink("txt", _context(Path("."))), SidecarTextSink)
    config = build_run_config("in", "out", output_format="pdf", sidecar=True)
    assert config.out.formats == ("pdf", "txt")
    assert build_run_config("in", "out", sidecar=True).out.formats == ("markdown", "jsonl", "txt")
    assert build_run_config("in", "out", output_format="txt,pdf").out.formats == ("txt", "pdf")
    assert build_run_config("in", "out").out.formats == ("markdown", "jsonl")
    # A run joined later (its recorded options as the base) keeps writing it.
    assert build_run_config("in", "out", base=config, output_format="pdf").out.formats == (
        "pdf",
        "txt",
    )


def test_headers_and_footers_can_be_left_out_of_the_text(tmp_path: Path) -> None:
    options = OutputOptions(formats=("txt",), drop_headers_footers=True)
    outputs = Outputs(options, LocalStore(tmp_path), "w", figures=False)
    outputs.write(_document("scan.pdf", PAGES[:1], 1))
    outputs.close()
    text = (tmp_path / "txt/scan.pdf.txt").read_text()
    assert text == "Quarterly report\n\nRevenue rose\nby twelve percent\n\na b\n1 2\n"


def _context(root: Path) -> SinkContext:
    return SinkContext(LocalStore(root), "w", False, lambda ids: None)
