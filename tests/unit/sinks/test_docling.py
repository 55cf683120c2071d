"""``--format docling``: a ``DoclingDocument`` a document that docling-core opens, exports
and chunks, reading like our Markdown; headers and footers in its furniture layer."""

from __future__ import annotations

import difflib
import importlib.util
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from ocrflow.sinks.base import DocumentMeta, FinishedDocument, figure_key
from ocrflow.sinks.figures import FigureSink
from ocrflow.storage.local import LocalStore
from ocrflow.types import (
    Block,
    BlockLabel,
    DocStatus,
    DocumentResult,
    Figure,
    ImageSize,
    PageResult,
    Route,
)
from tests.integration.cli_helpers import ocrflow
from tests.needs import need

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
HAS_DOCLING = importlib.util.find_spec("docling_core") is not None
needs_docling = pytest.mark.usefixtures("docling_installed")


@pytest.fixture
def docling_installed() -> None:
    """These tests need docling-core (the ``docling`` extra, installed by ``make test``)."""
    need("docling", HAS_DOCLING, "docling-core is not installed: pip install 'ocrflow[docling]'")


WORD = re.compile(r"\w+(?:[.,]\w+)*")


def _words(markdown: str) -> list[str]:
    """The words of Markdown, lowercased, without its syntax (links, pipes, #, *, _)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"<!--.*?-->|<[^>]+>", " ", text, flags=re.S)
    return WORD.findall(text.replace("_", " ").lower())


def _similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, _words(a), _words(b), autojunk=False).ratio()


@pytest.fixture(scope="module")
def out(examples_out: Path) -> Path:
    """OUT of a real run over the examples, docling beside Markdown (conftest.py)."""
    need("docling", HAS_DOCLING, "docling-core is not installed: pip install 'ocrflow[docling]'")
    return examples_out


def _loaded(out: Path) -> dict[str, object]:
    from docling_core.types.doc import DoclingDocument

    return {p.name: DoclingDocument.load_from_json(p) for p in sorted((out / "docling").iterdir())}


@needs_docling
def test_every_document_opens_and_reads_like_our_markdown(out: Path) -> None:
    documents = _loaded(out)
    assert set(documents) == {f"{p.name}.json" for p in EXAMPLES.iterdir()}
    for name, doc in documents.items():
        ours = (out / "markdown" / (name.removesuffix(".json") + ".md")).read_text("utf-8")
        theirs = doc.export_to_markdown()
        assert len(_words(ours)) > 20, name
        assert _similarity(ours, theirs) >= 0.9, (name, theirs[:500])
        assert doc.name == name.removesuffix(".json")


@needs_docling
def test_pages_and_provenance_are_in_page_units(out: Path) -> None:
    import pypdfium2 as pdfium
    from docling_core.types.doc import CoordOrigin

    for name, doc in _loaded(out).items():
        source = EXAMPLES / name.removesuffix(".json")
        # docling's units: a PDF's pages in points, an image in its own pixels.
        if source.suffix == ".pdf":
            pdf = pdfium.PdfDocument(source)
            sizes = [tuple(round(v, 2) for v in page.get_size()) for page in pdf]
            pdf.close()
        else:
            with Image.open(source) as image:
                sizes = [image.size] * getattr(image, "n_frames", 1)
        assert [(p.size.width, p.size.height) for _, p in sorted(doc.pages.items())] == sizes
        boxes = 0
        for item, _level in doc.iterate_items():
            for prov in getattr(item, "prov", []):
                size = doc.pages[prov.page_no].size
                box = prov.bbox
                assert box.coord_origin is CoordOrigin.TOPLEFT
                assert 0 <= box.l <= box.r <= size.width, (name, box, size)
                assert 0 <= box.t <= box.b <= size.height, (name, box, size)
                boxes += 1
        assert boxes >= 2, name
    # The sideways scan: its title runs up the page, a tall narrow box on the landscape image.
    rotated = _loaded(out)["rotated-page.png.json"]
    title = rotated.texts[0].prov[0].bbox
    assert (rotated.pages[1].size.width, rotated.pages[1].size.height) == (1754, 1240)
    assert title.b - title.t > 4 * (title.r - title.l)


def _pipe_table(markdown: str) -> list[list[str]]:
    lines = [ln for ln in markdown.splitlines() if ln.lstrip().startswith("|")]
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines]
    return [r for r in rows if not all(set(c) <= set("-: ") for c in r)]


@needs_docling
def test_a_table_becomes_a_table_item_of_its_rows_and_columns(out: Path) -> None:
    from docling_core.types.doc import TableItem

    doc = _loaded(out)["invoice-photo.jpg.json"]
    expected = _pipe_table((out / "markdown" / "invoice-photo.jpg.md").read_text("utf-8"))
    assert len(expected) >= 3
    tables = [item for item, _ in doc.iterate_items() if isinstance(item, TableItem)]
    assert len(tables) == 1
    data = tables[0].data
    assert (data.num_rows, data.num_cols) == (len(expected), len(expected[0]))
    grid = [[cell.text for cell in row] for row in data.grid]
    assert grid == expected
    assert [c.column_header for c in data.grid[0]] == [True] * data.num_cols


def _png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "gray").save(buffer, format="PNG")
    return buffer.getvalue()


def _rich_document() -> FinishedDocument:
    """One page with every label, boxes, a described figure with a caption block after
    it, an HTML table with spans and a running header and footer."""
    figure = Figure(1, 0, "image", (0.1, 0.5, 0.6, 0.7), _png(40, 30), "A grey square")
    html = (
        "<table><thead><tr><th rowspan='2'>Region</th><th colspan='2'>Sales</th></tr>"
        "<tr><th>2023</th><th>2024</th></tr></thead>"
        "<tr><td>North</td><td>10</td><td>12</td></tr></table>"
    )
    blocks = (
        Block(BlockLabel.PAGE_HEADER, "ACME Quarterly Review", (0.1, 0.01, 0.9, 0.03)),
        Block(BlockLabel.TITLE, "# Results of the quarter", (0.1, 0.05, 0.9, 0.08)),
        Block(BlockLabel.SECTION_HEADER, "### Regional detail", (0.1, 0.09, 0.5, 0.11)),
        Block(BlockLabel.TEXT, "Sales rose in\nevery region.", (0.1, 0.12, 0.9, 0.16)),
        Block(BlockLabel.LIST_ITEM, "1. North grew", (0.1, 0.17, 0.5, 0.19)),
        Block(BlockLabel.LIST_ITEM, "2. South held", (0.1, 0.2, 0.5, 0.22)),
        Block(BlockLabel.CAPTION, "Table 1: Sales by region", (0.1, 0.22, 0.9, 0.23)),
        Block(BlockLabel.TABLE, html, (0.1, 0.23, 0.9, 0.4)),
        Block(BlockLabel.FORMULA, "$$\nE = mc^2\n$$", (0.1, 0.41, 0.5, 0.45)),
        Block(BlockLabel.FIGURE, figure.placeholder, figure.box),
        Block(BlockLabel.CAPTION, "Figure 1: the square", (0.1, 0.71, 0.6, 0.73)),
        Block(BlockLabel.CODE, "```python\nprint('hi')\n```", (0.1, 0.74, 0.5, 0.78)),
        Block(BlockLabel.FOOTNOTE, "[^1]: Unaudited.", (0.1, 0.9, 0.5, 0.92)),
        Block(BlockLabel.PAGE_FOOTER, "Page 7 of 9", (0.4, 0.96, 0.6, 0.98)),
    )
    text = "\n\n".join(b.text for b in blocks)
    page = PageResult(1, text, Route.ENGINE, figures=(figure,), blocks=blocks,
                      image_size=ImageSize(1000, 2000))  # fmt: skip
    result = DocumentResult("rich01", "file:///in/r/q.png", DocStatus.OK, (page,), 1)
    return FinishedDocument(result, DocumentMeta("r/q.png", "ab" * 32, None, "vlm", "fp"))


@needs_docling
def test_every_label_maps_and_furniture_stays_out_of_the_body(tmp_path: Path) -> None:
    from docling_core.types.doc import (
        ContentLayer,
        DocItemLabel,
        DoclingDocument,
        PictureItem,
        TableItem,
    )

    from ocrflow.sinks.docling import DoclingSink, docling_key

    document = _rich_document()
    store = LocalStore(tmp_path)
    FigureSink(store).write(document)
    DoclingSink(store).write(document)
    path = tmp_path / docling_key("r/q.png")
    doc = DoclingDocument.load_from_json(path)
    body = doc.export_to_markdown()
    everything = doc.export_to_markdown(
        included_content_layers={ContentLayer.BODY, ContentLayer.FURNITURE}
    )
    for furniture in ("ACME Quarterly Review", "Page 7 of 9"):
        assert furniture not in body and furniture in everything
    furniture = {t.text: t for t in doc.texts if t.content_layer is ContentLayer.FURNITURE}
    assert furniture["ACME Quarterly Review"].label is DocItemLabel.PAGE_HEADER
    assert furniture["Page 7 of 9"].label is DocItemLabel.PAGE_FOOTER
    by_label = {t.label: t for t in doc.texts}
    assert by_label[DocItemLabel.TITLE].text == "Results of the quarter"
    heading = by_label[DocItemLabel.SECTION_HEADER]
    assert (heading.text, heading.level) == ("Regional detail", 2)
    assert by_label[DocItemLabel.TEXT].text == "Sales rose in every region."
    assert by_label[DocItemLabel.FORMULA].text == "E = mc^2"
    assert by_label[DocItemLabel.CODE].text == "print('hi')"
    assert by_label[DocItemLabel.FOOTNOTE].text == "[^1]: Unaudited."
    items = [t for t in doc.texts if t.label is DocItemLabel.LIST_ITEM]
    assert [(i.text, i.enumerated) for i in items] == [("North grew", True), ("South held", True)]
    assert items[0].parent == items[1].parent  # one list
    table = next(i for i, _ in doc.iterate_items() if isinstance(i, TableItem))
    assert (table.data.num_rows, table.data.num_cols) == (3, 3)
    assert table.caption_text(doc) == "Table 1: Sales by region"  # printed above it
    assert [[c.text for c in row] for row in table.data.grid] == [
        ["Region", "Sales", "Sales"], ["Region", "2023", "2024"], ["North", "10", "12"],
    ]  # fmt: skip
    picture = next(i for i, _ in doc.iterate_items() if isinstance(i, PictureItem))
    # The printed caption wins over the description.
    assert picture.caption_text(doc) == "Figure 1: the square"
    assert "Figure 1: the square" in body and "A grey square" not in body
    assert (picture.image.size.width, picture.image.size.height) == (40, 30)
    image = (path.parent / str(picture.image.uri)).resolve()
    assert image == (tmp_path / figure_key("rich01", 1, 0)).resolve() and image.is_file()
    # Boxes in the pixels of the 1000 x 2000 image: the footer at 0.4..0.6, 0.96..0.98.
    footer = furniture["Page 7 of 9"].prov[0]
    assert (footer.page_no, footer.bbox.l, footer.bbox.t) == (1, 400, 1920)
    assert (footer.bbox.r, footer.bbox.b) == (600, 1960)
    assert footer.charspan == (0, len("Page 7 of 9"))
    # Every block of the page is somewhere in docling's tree, furniture included.
    assert doc.origin is not None and doc.origin.filename == "q.png"
    assert doc.origin.mimetype == "image/png"


@needs_docling
def test_a_described_figure_without_caption_block_is_captioned_by_its_description(
    tmp_path: Path,
) -> None:
    from docling_core.types.doc import DoclingDocument, PictureItem

    from ocrflow.sinks.docling import DoclingSink, docling_key

    figure = Figure(1, 0, "image", (0.1, 0.1, 0.5, 0.5), _png(8, 8), "A **bar** chart")
    blocks = (Block(BlockLabel.FIGURE, figure.placeholder), Block(BlockLabel.TEXT, "After."))
    page = PageResult(1, f"{figure.placeholder}\n\nAfter.", Route.ENGINE, figures=(figure,),
                      blocks=blocks)  # fmt: skip
    result = DocumentResult("fig01", "file:///in/f.pdf", DocStatus.OK, (page,), 1)
    store = LocalStore(tmp_path)
    DoclingSink(store).write(FinishedDocument(result, DocumentMeta("f.pdf", "", None, "e", "f")))
    doc = DoclingDocument.load_from_json(tmp_path / docling_key("f.pdf"))
    picture = next(i for i, _ in doc.iterate_items() if isinstance(i, PictureItem))
    assert picture.caption_text(doc) == "A **bar** chart"
    assert not doc.pages  # no image size and no PDF at hand: no page, no provenance
    assert doc.export_to_markdown().rstrip().endswith("After.")


@needs_docling
def test_the_hierarchical_chunker_chunks_a_loaded_document(out: Path) -> None:
    # docling-core's chunker package imports tree-sitter (the test extra installs it).
    from docling_core.transforms.chunker import hierarchical_chunker as chunker

    doc = _loaded(out)["scanned.pdf.json"]
    chunks = list(chunker.HierarchicalChunker().chunk(doc))
    assert len(chunks) >= 3
    text = " ".join(c.text for c in chunks)
    assert _similarity(doc.export_to_markdown(), text) >= 0.8
    assert all(c.meta.doc_items and c.meta.doc_items[0].prov for c in chunks)


# A finder that makes docling_core look uninstalled, then runs the CLI as a user would.
_WITHOUT_DOCLING = """
import runpy, sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name == "docling_core" or name.startswith("docling_core."):
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Hide())
sys.argv = ["ocrflow", *sys.argv[1:]]
runpy.run_module("ocrflow.cli", run_name="__main__")
"""


def test_without_docling_core_the_run_refuses_to_start(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_DOCLING, "run", str(EXAMPLES / "scanned.pdf"),
         "-o", str(out), "--format", "markdown,docling"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "ocrflow[docling]" in done.stderr + done.stdout
    assert not list(out.glob("markdown/*")), "a document was converted"
    assert "Traceback" not in done.stderr


@needs_docling
def test_figures_inside_text_and_bare_image_links_become_pictures(tmp_path: Path) -> None:
    from docling_core.types.doc import DoclingDocument, PictureItem, TextItem

    from ocrflow.sinks.docling import DoclingSink, docling_key

    figure = Figure(1, 0, "image", (0.1, 0.1, 0.5, 0.5), _png(8, 8), "A map of Bristol")
    blocks = (
        Block(BlockLabel.TEXT, f"See the map {figure.placeholder} below."),
        Block(BlockLabel.FIGURE, "![Harbour photo](https://example.org/h.png)"),
    )
    text = "\n\n".join(b.text for b in blocks)
    page = PageResult(1, text, Route.ENGINE, figures=(figure,), blocks=blocks)
    result = DocumentResult("inl01", "file:///in/i.png", DocStatus.OK, (page,), 1)
    store = LocalStore(tmp_path)
    DoclingSink(store).write(FinishedDocument(result, DocumentMeta("i.png", "", None, "e", "f")))
    doc = DoclingDocument.load_from_json(tmp_path / docling_key("i.png"))
    items = [i for i, _ in doc.iterate_items()]
    body = [i for i in items if isinstance(i, TextItem) and i.label == "text"]
    assert [t.text for t in body] == ["See the map below."]
    pictures = [i for i in items if isinstance(i, PictureItem)]
    assert [p.caption_text(doc) for p in pictures] == ["A map of Bristol", "Harbour photo"]
    assert pictures[0].image is not None and pictures[1].image is None


@needs_docling
@pytest.mark.slow
def test_a_vlm_run_gives_pictures_linked_to_their_figure_files(
    corpus: Path, tmp_path: Path
) -> None:
    """The deepseek recipe against the fake server (a title, text and an image region a
    page): JSON valid against the schema, docling pictures whose images are our crops."""
    import jsonschema
    from docling_core.types.doc import DoclingDocument, PictureItem

    from tests.fakevllm.process import running_server

    pdf = corpus / "pdfs" / "docling__normal_4pages.pdf"
    out = tmp_path / "out"
    flags = ("--reply-format", "deepseek", "--model", "deepseek-ocr", "--pages-per-s", "200")
    with running_server(*flags) as server:
        done = ocrflow(
            "run", str(pdf), "-o", str(out), "--text-layer", "off", "--engine", "openai",
            "--server", server.base_url, "--model", "deepseek-ocr", "--recipe", "deepseek",
            "--format", "markdown,json,docling", "--workers", "1", "-q", timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    schema = json.loads((REPO / "docs" / "document.schema.json").read_text("utf-8"))
    data = json.loads((out / "json" / f"{pdf.name}.json").read_text("utf-8"))
    jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)
    assert [b["label"] for b in data["pages"][0]["blocks"]] == ["title", "text", "figure"]
    path = out / "docling" / f"{pdf.name}.json"
    doc = DoclingDocument.load_from_json(path)
    pictures = [i for i, _ in doc.iterate_items() if isinstance(i, PictureItem)]
    assert [p.prov[0].page_no for p in pictures] == [1, 2, 3, 4]
    for picture in pictures:
        image = (path.parent / str(picture.image.uri)).resolve()
        assert image.is_file() and image.is_relative_to((out / "figures").resolve())
        with Image.open(image) as png:
            assert png.size == (picture.image.size.width, picture.image.size.height)
    ours = (out / "markdown" / f"{pdf.name}.md").read_text("utf-8")
    assert _similarity(ours, doc.export_to_markdown()) >= 0.9
