"""``--format pdf`` end to end: the real ``ocrflow run`` on ``examples/`` and on corpus scans
(rotated pages included), checked with poppler's ``pdftotext``, an implementation that
shares nothing with ours:

- the text of each OCR'd page (one that had no text of its own) holds >= 95 % of the
  words of our Markdown for that page;
- ``pdftotext -bbox`` puts every word it finds on an OCR'd page inside a line (or block)
  box we recorded for that page (a table's cell inside its row: the layer draws each
  row as one line);
- the image streams of a PDF input come back byte for byte, and its own content streams
  stay (pages not OCR'd keep their contents unchanged);
- a rerun rewrites nothing.
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
from pathlib import Path

import pikepdf
import pytest

from ocrflow import results
from ocrflow.document.model import Document, Page
from ocrflow.document.words import block_lines, plain_lines
from ocrflow.sinks.pdf_text_layer import gets_text_layer
from ocrflow.types import BlockLabel
from tests.integration.cli_helpers import ocrflow
from tests.needs import CORPUS, need

REPO = Path(__file__).resolve().parents[2]
#: Scans without a text layer: rotated pages (PDF /Rotate 0/90/180/270 and content turned
#: in the image), JBIG2 and CCITT codecs, a multi-page TIFF's sibling and a PNG.
CORPUS_FILES = (
    "pdfs/docling__nemotron_multipage.pdf",
    "pdfs/docling__ocr_test_rotated_90.pdf",
    "pdfs/ocrmypdf__linn.pdf",
    "pdfs/ocrmypdf__ccitt.pdf",
    "images/tesseract__phototest-rotated-L.png",
    "images/tesseract__phototest.tif",
)
#: How far (fraction of the page) a word pdftotext finds may stray out of our box: its
#: boxes come from the font's ascent and descent, ours from the engine's pixels.
SLACK = 0.012
_WORD = re.compile(
    r'<word xMin="([-\d.]+)" yMin="([-\d.]+)" xMax="([-\d.]+)" yMax="([-\d.]+)">([^<]*)</word>'
)
_PAGE = re.compile(r'<page width="([\d.]+)" height="([\d.]+)">(.*?)</page>', re.S)


def _need_pdftotext() -> None:
    if shutil.which("pdftotext") is None:
        pytest.skip("[needs poppler] pdftotext is not installed (Debian: poppler-utils)")


def tokens(text: str) -> list[str]:
    """Words as both sides can agree on them: runs of letters and digits, lower case."""
    return re.findall(r"\w+", text.lower())


def pdftotext_page(pdf: Path, number: int) -> str:
    """The text of one page (``-cropbox``: the page as rendered)."""
    done = subprocess.run(
        ["pdftotext", "-cropbox", "-f", str(number), "-l", str(number), str(pdf), "-"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def pdftotext_boxes(pdf: Path) -> list[list[tuple[str, tuple[float, float, float, float]]]]:
    """Each page's words with their boxes as fractions of the page as shown (pdftotext
    measures in the crop box turned by /Rotate, but names the page's unturned size)."""
    done = subprocess.run(
        ["pdftotext", "-cropbox", "-bbox", str(pdf), "-"],
        capture_output=True,
        text=True,
        check=True,
    )
    with pikepdf.open(pdf) as opened:
        turns = [int(p.obj.get("/Rotate", 0) or 0) % 180 for p in opened.pages]
    pages = []
    for turn, (width, height, body) in zip(turns, _PAGE.findall(done.stdout), strict=True):
        w, h = (float(height), float(width)) if turn else (float(width), float(height))
        pages.append(
            [
                (text, (float(a) / w, float(b) / h, float(c) / w, float(d) / h))
                for a, b, c, d, text in _WORD.findall(body)
            ]
        )
    return pages


def recorded_boxes(page: Page) -> list[tuple[float, float, float, float]]:
    """The boxes the engine recorded for the page's printed text: lines, else blocks."""
    boxes = []
    for block in page.blocks:
        lines = [line.bbox for line in block_lines(block) if line.bbox is not None]
        boxes.extend(lines or ([block.bbox] if block.bbox else []))
    return boxes


def table_rows(page: Page) -> list[tuple[float, float, float, float]]:
    """The boxes of the rows of the page's tables: each cell's joined with those level
    with it."""
    rows = []
    for block in page.blocks:
        if block.label is not BlockLabel.TABLE:
            continue
        cells = [line.bbox for line in block_lines(block) if line.bbox is not None]
        for a in cells:
            level = [b for b in cells if min(a[3], b[3]) - max(a[1], b[1]) > 0.5 * (a[3] - a[1])]
            rows.append(
                (
                    min(b[0] for b in level),
                    min(b[1] for b in level),
                    max(b[2] for b in level),
                    max(b[3] for b in level),
                )
            )
    return rows


def inside(box: tuple[float, ...], outer: tuple[float, ...]) -> bool:
    return (
        box[0] >= outer[0] - SLACK
        and box[1] >= outer[1] - SLACK
        and box[2] <= outer[2] + SLACK
        and box[3] <= outer[3] + SLACK
    )


def touching_pairs(boxes: list[tuple[float, ...]]) -> list[tuple[float, ...]]:
    """The union of each two boxes that touch side by side on one line: an extractor joins
    two words whose boxes touch into one (as the engine did where two of its lines
    overlapped: "2024Due:")."""
    joined = []
    for a in boxes:
        for b in boxes:
            level = min(a[3], b[3]) - max(a[1], b[1]) > 0.5 * (a[3] - a[1])
            if a is not b and level and a[0] < b[0] <= a[2] + SLACK:
                joined.append((a[0], min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])))
    return joined


def image_streams(page: pikepdf.Page) -> list[bytes]:
    """The raw (still encoded) bytes of every image the page draws, forms included."""
    found: list[bytes] = []

    def walk(resources: pikepdf.Object) -> None:
        for xobject in (resources.get("/XObject") or {}).values():
            if xobject.get("/Subtype") == "/Image":
                found.append(xobject.read_raw_bytes())
            elif xobject.get("/Subtype") == "/Form" and "/Resources" in xobject:
                walk(xobject.Resources)

    walk(page.Resources)
    return sorted(found)


def content_streams(page: pikepdf.Page) -> list[bytes]:
    contents = page.obj.get("/Contents")
    if contents is None:
        return []
    items = contents if isinstance(contents, pikepdf.Array) else [contents]
    return [item.read_raw_bytes() for item in items]


def check_document(document: Document, source: Path, pdf: Path) -> dict[str, int]:
    """Assert what the module docstring promises for one document; count what was checked."""
    counts = collections.Counter[str]()
    boxes = pdftotext_boxes(pdf)
    for page in document.pages:
        if not gets_text_layer(page):
            continue
        if source.suffix.lower() == ".pdf" and tokens(pdftotext_page(source, page.number)):
            # A page with text of its own, OCR'd anyway (--text-layer off): both layers are
            # there, interleaved, and pdftotext's words mix them. Its streams are checked below.
            counts["pages_with_own_text"] += 1
            continue
        ours = collections.Counter(tokens(" ".join(plain_lines(page.markdown))))
        theirs = collections.Counter(tokens(pdftotext_page(pdf, page.number)))
        found = sum(min(n, theirs[w]) for w, n in ours.items())
        assert found >= 0.95 * sum(ours.values()), (source.name, page.number, ours - theirs)
        recorded = recorded_boxes(page)
        recorded += touching_pairs(recorded) + table_rows(page)
        for text, box in boxes[page.number - 1]:
            assert any(inside(box, outer) for outer in recorded), (source.name, text, box)
            counts["boxes"] += 1
        counts["words"] += sum(ours.values())
        counts["pages"] += 1
    if source.suffix.lower() == ".pdf":
        with pikepdf.open(source) as before, pikepdf.open(pdf) as after:
            assert len(after.pages) == len(before.pages)
            ocr = {p.number for p in document.pages if gets_text_layer(p)}
            for number, (old, new) in enumerate(zip(before.pages, after.pages, strict=True), 1):
                assert image_streams(new) == image_streams(old), (source.name, number)
                old_contents, new_contents = content_streams(old), content_streams(new)
                if number in ocr:  # ours wrap the page's own: q, its streams, Q + text
                    assert new_contents[1:-1] == old_contents, (source.name, number)
                else:
                    assert new_contents == old_contents, (source.name, number)
                counts["images"] += len(image_streams(old))
    if source.suffix.lower() in {".jpg", ".jpeg"}:  # embedded as it is, not re-encoded
        with pikepdf.open(pdf) as after:
            assert image_streams(after.pages[0]) == [source.read_bytes()]
            counts["images"] += 1
    return counts


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.rglob("*.pdf"))}


def run_and_check(inputs: Path, out: Path) -> dict[str, int]:
    """Run ``--format pdf,markdown,jsonl --text-layer off`` on ``inputs``, check each PDF,
    rerun and check that nothing was rewritten."""
    done = ocrflow(
        "run", str(inputs), "-o", str(out), "--format", "pdf,markdown,jsonl", "--text-layer", "off"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    totals = collections.Counter[str]()
    documents = list(results(out))
    assert documents
    for document in documents:
        rel = document.metadata["rel"]
        pdf = out / "pdf" / f"{rel}.pdf"
        assert pdf.is_file(), rel
        totals.update(check_document(document, inputs / rel, pdf))
        totals["documents"] += 1
    before = snapshot(out / "pdf")
    again = ocrflow(
        "run", str(inputs), "-o", str(out), "--format", "pdf,markdown,jsonl", "--text-layer", "off"
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert snapshot(out / "pdf") == before
    return totals


def test_examples_become_searchable_pdfs(tmp_path: Path) -> None:
    _need_pdftotext()
    totals = run_and_check(REPO / "examples", tmp_path / "out")
    assert totals["documents"] == len(list((REPO / "examples").iterdir()))
    assert totals["pages"] >= 7 and totals["boxes"] >= 200 and totals["images"] >= 3, totals


def test_corpus_scans_and_rotated_pages(tmp_path: Path) -> None:
    _need_pdftotext()
    need("corpus", CORPUS.is_dir(), f"no corpus at {CORPUS}")
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name in CORPUS_FILES:
        (inputs / Path(name).name).symlink_to(CORPUS / name)
    totals = run_and_check(inputs, tmp_path / "out")
    assert totals["documents"] == len(CORPUS_FILES)
    assert totals["pages"] >= 9 and totals["boxes"] >= 500, totals
