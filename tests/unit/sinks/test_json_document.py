"""``--format json``: the document model as one JSON file a document, valid against the
published schema (docs/document.schema.json), read back by ``Document.from_dict``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from ocrflow.document import Document
from ocrflow.sinks.base import DocumentMeta, FinishedDocument, figure_key
from ocrflow.sinks.json_document import JsonSink, json_key
from ocrflow.storage.local import LocalStore
from ocrflow.types import (
    Block,
    BlockLabel,
    DocStatus,
    DocumentResult,
    Figure,
    PageResult,
    PageStatus,
    Route,
)

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
SCHEMA = json.loads((REPO / "docs" / "document.schema.json").read_text("utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=None)


@pytest.fixture(scope="module")
def out(examples_out: Path) -> Path:
    """OUT of a real run over the examples, JSON beside Markdown (conftest.py)."""
    return examples_out


def _documents(out: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text("utf-8")) for p in sorted((out / "json").rglob("*"))}


def test_the_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_every_json_file_of_a_real_run_validates(out: Path) -> None:
    documents = _documents(out)
    assert set(documents) == {f"{p.name}.json" for p in EXAMPLES.iterdir()}
    for name, data in documents.items():
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in VALIDATOR.iter_errors(data)]
        assert not errors, (name, errors[:5])
        # The file's Markdown is the Markdown sink's, page for page.
        md_file = out / "markdown" / (name.removesuffix(".json") + ".md")
        assert data["markdown"].strip() == md_file.read_text("utf-8").strip(), name
    blocks = [b for d in documents.values() for p in d["pages"] for b in p["blocks"]]
    # Not a trivially valid run: typed blocks with boxes and lines, and a table.
    assert {b["label"] for b in blocks} >= {"text", "table"}
    assert all(b["bbox"] is not None and b["lines"] for b in blocks)
    routes = {p["route"] for d in documents.values() for p in d["pages"]}
    assert routes >= {"text_layer", "engine", "blank"}


def test_the_schema_is_closed_where_the_model_is(out: Path) -> None:
    data = _documents(out)["invoice-photo.jpg.json"]
    assert VALIDATOR.is_valid(data)
    for mutate in (
        lambda d: d.update(extra=1),
        lambda d: d["pages"][0].update(extra=1),
        lambda d: d["pages"][0]["blocks"][0].update(extra=1),
        lambda d: d["pages"][0]["blocks"][0]["lines"][0].update(extra=1),
        lambda d: d["pages"][0]["blocks"][0].update(label="paragraph"),
        lambda d: d["pages"][0].update(route="ocr"),
        lambda d: d.update(status="done"),
        lambda d: d["pages"][0]["blocks"][0].update(bbox=[0.1, 0.2, 0.3]),
        lambda d: d["pages"][0]["blocks"][0].update(confidence=1.5),
    ):
        broken = copy.deepcopy(data)
        mutate(broken)
        assert not VALIDATOR.is_valid(broken)
    # Metadata and attributes are open: callers may add their own keys.
    open_ = copy.deepcopy(data)
    open_["metadata"]["project"] = "x"
    open_["pages"][0]["attributes"]["mine"] = [1]
    assert VALIDATOR.is_valid(open_)


def test_the_schema_enums_are_the_python_enums() -> None:
    defs = SCHEMA["$defs"]
    assert defs["block_label"]["enum"] == [str(v) for v in BlockLabel]
    assert defs["doc_status"]["enum"] == [str(v) for v in DocStatus]
    assert defs["page_status"]["enum"] == [str(v) for v in PageStatus]
    assert defs["route"]["enum"] == [str(v) for v in Route]
    # Every key to_dict writes is in the schema, and the schema names no other.
    page = SCHEMA["$defs"]["page"]
    assert set(SCHEMA["properties"]) == set(Document("x", "", DocStatus.OK).to_dict())
    assert set(page["required"]) == set(page["properties"])


def test_from_dict_reads_every_file_back_to_equal_pages(out: Path) -> None:
    for name, data in _documents(out).items():
        document = Document.from_dict(data)
        assert document.to_dict() == data, name
        again = Document.from_dict(json.loads(json.dumps(document.to_dict())))
        assert again.pages == document.pages, name
        assert len(document.pages) == len(data["pages"]) >= 1


def test_figure_links_lead_from_the_json_folder_to_the_figure(tmp_path: Path) -> None:
    figure = Figure(1, 0, "image", (0.1, 0.1, 0.5, 0.5), description="A bar chart")
    block = Block(BlockLabel.FIGURE, figure.placeholder, (0.1, 0.1, 0.5, 0.5))
    page = PageResult(1, f"Intro\n\n{figure.placeholder}", Route.ENGINE, figures=(figure,),
                      blocks=(Block(BlockLabel.TEXT, "Intro"), block))  # fmt: skip
    result = DocumentResult("abc123", "file:///in/a/b/c.pdf", DocStatus.OK, (page,), 1)
    meta = DocumentMeta("a/b/c.pdf", "0" * 64, None, "embedded", "fp")
    store = LocalStore(tmp_path)
    JsonSink(store).write(FinishedDocument(result, meta))
    path = tmp_path / json_key("a/b/c.pdf")
    data = json.loads(path.read_text("utf-8"))
    assert VALIDATOR.is_valid(data)
    link = data["pages"][0]["blocks"][1]["text"].split("(", 1)[1].split(")", 1)[0]
    assert link == "../../../" + figure_key("abc123", 1, 0)
    assert (path.parent / link).resolve() == (tmp_path / figure_key("abc123", 1, 0)).resolve()
    assert "A bar chart" in data["markdown"] and "<!--figure" not in data["markdown"]
    # A failed document gets no file.
    failed = DocumentResult("dead", "file:///in/x.pdf", DocStatus.FAILED, (), 1, "corrupt")
    JsonSink(store).write(FinishedDocument(failed, DocumentMeta("x.pdf", "", None, "e", "f")))
    assert not (tmp_path / json_key("x.pdf")).exists()
