"""open_pdf's failure reasons must not depend on which file the worker opened before."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from ocrflow.errors import RenderError
from ocrflow.render.pdf import open_pdf, page_count
from tests.needs import CORPUS, need_corpus_file


def _zero_page_pdf() -> bytes:
    """A well-formed PDF whose page tree is empty, with a correct xref table."""
    objects = [b"<< /Pages 2 0 R /Type /Catalog >>", b"<< /Count 0 /Kids [ ] /Type /Pages >>"]
    body, offsets = bytearray(b"%PDF-1.3\n"), []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(body))
        body += b"%d 0 obj\n%s\nendobj\n" % (number, obj)
    xref = len(body)
    body += b"xref\n0 3\n0000000000 65535 f \n"
    body += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    body += b"trailer << /Root 1 0 R /Size 3 >>\nstartxref\n%d\n%%%%EOF\n" % xref
    return bytes(body)


@pytest.fixture()
def bad_files(tmp_path: Path) -> dict[str, Path]:
    files = {
        "empty": tmp_path / "zero-pages.pdf",
        "corrupt": tmp_path / "garbage.pdf",
    }
    files["empty"].write_bytes(_zero_page_pdf())
    files["corrupt"].write_bytes(b"%PDF-1.4\n" + bytes(range(256)) * 8)
    return files


def _reason(path: Path) -> str:
    try:
        pdf, _ = open_pdf(str(path))
        page_count(pdf)
    except RenderError as exc:
        return exc.reason
    return "ok"


def test_reasons_hold_in_any_order(bad_files: dict[str, Path]) -> None:
    # PDFium's last error is per thread and a zero-page file does not write it: opened
    # right after a corrupt file, it used to inherit "corrupt".
    for order in itertools.permutations(bad_files.items()):
        for _ in range(2):
            for expected, path in order:
                assert _reason(path) == expected, (path.name, [p.name for _, p in order])


# Files that PDFium itself refuses (a 0-byte file is refused before PDFium sees it).
CORPUS_REASONS = {
    "ocrmypdf__invalid.pdf": "corrupt",
    "pdfjs__bug1020226.pdf": "corrupt",
    "pdf2image__test_corrupted.pdf": "corrupt",
    "qpdf__zero-pages.pdf": "empty",
    "pdfjs__issue3371.pdf": "encrypted",
    "pdfjs__saslprep-r6.pdf": "encrypted",
    "pdfplumber__password-example.pdf": "encrypted",
}


def test_corpus_failures_hold_forwards_and_backwards() -> None:
    paths = {name: CORPUS / "pdfs" / name for name in CORPUS_REASONS}
    for path in paths.values():
        need_corpus_file(path)
    for order in (list(paths), list(reversed(paths))):
        got = {name: _reason(paths[name]) for name in order}
        assert got == CORPUS_REASONS, order
