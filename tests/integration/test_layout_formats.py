"""``--format alto,hocr`` through the real CLI: on the examples (embedded engine, a text-layer
PDF, a turned page), and with Tesseract on corpus scans and a born-digital PDF. Every ALTO
file validates against the vendored ALTO 4.4 XSD, every String lies inside its TextLine,
TextBlock and page, each page's words are the Markdown's (>= 95 % in order), the hOCR
parses with hocr-tools and holds the same words at the same boxes; a rerun rewrites nothing.
The fake VLM server covers the models' two kinds of pages: Markdown only (every box
estimated) and a box per block with a figure (DeepSeek-OCR's grounding).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lxml import etree

from tests.fakevllm.process import running_server
from tests.needs import need_tesseract
from tests.unit.sinks.alto_hocr_helpers import (
    NS,
    alto_schema,
    assert_same_words,
    assert_valid,
    markdown_words,
    overlap,
)

from .cli_helpers import ocrflow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FORMATS = "alto,hocr,markdown"
#: Tesseract on two scans (one two-column) and a born-digital three-page PDF (text layer).
CORPUS_FILES = (
    "images/tesseract__phototest.tif",
    "images/ocrmypdf__linn.png",
    "pdfs/pypdf-samples__multicolumn.pdf",
)
_PAGE = re.compile(r"<!-- page (\d+) -->")


def _markdown_pages(text: str) -> dict[int, str]:
    parts = _PAGE.split(text)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def _check_outputs(out: Path) -> dict[str, dict[int, list]]:
    """Run every check on every document of OUT; each document's words by page."""
    schema = alto_schema()
    documents = {}
    for markdown in sorted((out / "markdown").rglob("*.md")):
        rel = str(markdown.relative_to(out / "markdown"))[: -len(".md")]
        alto = (out / "alto" / f"{rel}.xml").read_bytes()
        assert_valid(schema, alto)
        pages = assert_same_words(alto, out / "hocr" / f"{rel}.hocr")
        expected = _markdown_pages(markdown.read_text())
        assert pages.keys() == expected.keys(), rel
        for number, words in pages.items():
            share = overlap(markdown_words(expected[number]), [w for w, _, _ in words])
            assert share >= 0.95, (rel, number, share)
        documents[rel] = pages
    return documents


def _outputs(out: Path) -> dict[str, int]:
    files = [*(out / "alto").rglob("*.xml"), *(out / "hocr").rglob("*.hocr")]
    return {str(p.relative_to(out)): p.stat().st_mtime_ns for p in files}


def test_examples_in_alto_and_hocr_validate_and_match_the_markdown(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ("run", str(EXAMPLES), "-o", str(out), "--format", FORMATS, "--page-separator", "-q")
    done = ocrflow(*args)
    assert done.returncode == 0, done.stderr
    documents = _check_outputs(out)
    inputs = {p.name for p in EXAMPLES.iterdir() if p.is_file()}
    assert set(documents) == inputs
    assert sum(len(words) for pages in documents.values() for words in pages.values()) > 300
    # The born-digital PDF's pages come from its text layer: no image, a nominal page.
    root = etree.fromstring((out / "alto" / "born-digital.pdf.xml").read_bytes())
    sizes = {(p.get("WIDTH"), p.get("HEIGHT")) for p in root.iterfind(".//a:Page", NS)}
    assert sizes == {("2480", "3508")}
    # The turned page: its lines run up the page, and its words with them.
    root = etree.fromstring((out / "alto" / "rotated-page.png.xml").read_bytes())
    assert root.find(".//a:TextBlock", NS).get("ROTATION") == "90"
    first_line = documents["rotated-page.png"][1][:5]
    tops = [box[1] for _, box, _ in first_line]
    assert tops == sorted(tops, reverse=True) and tops[0] > tops[-1]

    before = _outputs(out)
    again = ocrflow(*args)
    assert again.returncode == 0, again.stderr
    assert _outputs(out) == before  # nothing rewritten


def test_tesseract_words_with_confidences_on_corpus_scans_and_a_text_layer_pdf(
    corpus: Path, tmp_path: Path
) -> None:
    need_tesseract()
    out = tmp_path / "out"
    inputs = [str(corpus / name) for name in CORPUS_FILES]
    args = ("run", *inputs, "-o", str(out), "--engine", "tesseract", "--format", FORMATS)
    done = ocrflow(*args, "--page-separator", "-q")
    assert done.returncode == 0, done.stderr
    documents = _check_outputs(out)
    assert set(documents) == {Path(name).name for name in CORPUS_FILES}
    for name in ("tesseract__phototest.tif", "ocrmypdf__linn.png"):
        words = documents[name][1]
        assert len(words) >= 50, name
        # Tesseract scores every word: every String has a WC and its hOCR an x_wconf.
        assert all(wc is not None for _, _, wc in words), name
    assert len(documents["ocrmypdf__linn.png"][1]) >= 500  # both columns
    phototest = [w for w, _, _ in documents["tesseract__phototest.tif"][1]]
    assert phototest[:4] == ["This", "is", "a", "lot"]
    assert len(documents["pypdf-samples__multicolumn.pdf"]) == 3
    text_layer = etree.fromstring((out / "alto/pypdf-samples__multicolumn.pdf.xml").read_bytes())
    assert {p.get("WIDTH") for p in text_layer.iterfind(".//a:Page", NS)} == {"2480"}
    assert text_layer.find(".//a:String", NS).get("WC") is None  # a text layer has no score


@pytest.mark.parametrize("reply", ["markdown", "deepseek"])
def test_vlm_pages_with_and_without_boxes(tmp_path: Path, reply: str) -> None:
    out = tmp_path / "out"
    model = ("--model", "deepseek-ocr") if reply == "deepseek" else ("--model", "fake-ocr")
    recipe = ("--recipe", "deepseek") if reply == "deepseek" else ()
    inputs = (str(EXAMPLES / "scanned.pdf"), str(EXAMPLES / "rotated-page.png"))
    with running_server("--reply-format", reply, "--pages-per-s", "200", *model) as server:
        done = ocrflow(
            "run", *inputs, "-o", str(out), "--text-layer", "off", "--engine", "openai",
            "--server", server.base_url, *model, *recipe, "--format", FORMATS,
            "--page-separator", "--workers", "1", "-q",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    documents = _check_outputs(out)
    assert set(documents) == {"scanned.pdf", "rotated-page.png"}
    root = etree.fromstring((out / "alto" / "scanned.pdf.xml").read_bytes())
    blocks = root.find(".//a:Page", NS).findall(".//a:TextBlock", NS)
    estimated = [b for b in blocks if "GEOMETRY_ESTIMATED" in b.get("TAGREFS")]
    if reply == "markdown":  # no boxes at all: every block laid out down the page
        assert blocks and estimated == blocks
        tops = [int(b.get("VPOS")) for b in blocks]
        assert tops == sorted(tops)
    else:  # the model's boxes, and its figure as an Illustration
        assert blocks and not estimated
        assert len(root.findall(".//a:Illustration", NS)) == 2  # one on each page
