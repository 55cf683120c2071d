"""Every output format at once (issue 17's acceptance): the examples and ten corpus documents
(scans, born-digital, rotated, tables) in markdown, jsonl, json, pdf, hocr, alto, docling and
chunks; each file checked by a third party where the format has one; a rerun rewrites
nothing; a SIGKILL mid-run, then a rerun, writes each document's files once."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pikepdf
import pytest
from lxml import etree, html

from ocrflow.sinks import KNOWN_FORMATS
from ocrflow.sinks.alto import alto_schema_path
from ocrflow.storage.names import safe_relpath
from tests.needs import REPO

from .cli_helpers import ocrflow, results

pytestmark = pytest.mark.slow

FORMATS = ("markdown", "jsonl", "json", "pdf", "hocr", "alto", "docling", "chunks")
#: Where each format puts a document (``rel`` is its path relative to its input's root).
FILES = {
    "markdown": "markdown/{rel}.md",
    "json": "json/{rel}.json",
    "pdf": "pdf/{rel}.pdf",
    "hocr": "hocr/{rel}.hocr",
    "alto": "alto/{rel}.xml",
    "docling": "docling/{rel}.json",
    "chunks": "chunks/{rel}.jsonl",
}
CORPUS_DOCS = (
    "ocrmypdf__c02-22.pdf",  # scans
    "ocrmypdf__skew.pdf",
    "docling__ocr_test.pdf",
    "docling__ocr_test_rotated_90.pdf",  # rotated
    "docling__ocr_test_rotated_180.pdf",
    "pypdf-samples__habibi-rotated.pdf",
    "unstructured__table-multi-row-column-cells.pdf",  # tables
    "docling__2305.03393v1-pg9.pdf",
    "docling__code_and_formula.pdf",  # born-digital
    "pdfjs__tracemonkey.pdf",
)
SCHEMA = json.loads((REPO / "docs" / "document.schema.json").read_text())


def _inputs(corpus: Path, into: Path) -> Path:
    """One folder: the bundled examples and the corpus documents, copied by name."""
    into.mkdir()
    for source in sorted((REPO / "examples").iterdir()):
        shutil.copyfile(source, into / source.name)
    for name in CORPUS_DOCS:
        shutil.copyfile(corpus / "pdfs" / name, into / name)
    return into


def _outputs(out: Path) -> dict[str, tuple[int, int]]:
    """Every output file (the workspace aside) with its mtime and size."""
    return {
        str(p.relative_to(out)): (p.stat().st_mtime_ns, p.stat().st_size)
        for p in out.rglob("*")
        if p.is_file() and ".ocrflow" not in p.parts
    }


@pytest.fixture(scope="module")
def converted(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(inputs, OUT) of one run in every format."""
    base = tmp_path_factory.mktemp("all-formats")
    inputs = _inputs(corpus, base / "in")
    out = base / "out"
    done = ocrflow("run", str(inputs), "-o", str(out), "--format", ",".join(FORMATS), "-q")
    assert done.returncode == 0, done.stderr[-3000:]
    return inputs, out


def test_every_format_is_written_for_every_document(converted: tuple[Path, Path]) -> None:
    inputs, out = converted
    assert set(FORMATS) <= set(KNOWN_FORMATS)
    records = results(out)
    assert len(records) == len(list(inputs.iterdir()))
    for record in records:
        rel = safe_relpath(record["metadata"]["source_path"])
        for fmt, pattern in FILES.items():
            assert (out / pattern.format(rel=rel)).is_file(), (fmt, rel)


def test_each_file_passes_its_format_check(converted: tuple[Path, Path]) -> None:
    from docling_core.types.doc import DoclingDocument

    inputs, out = converted
    alto_schema = etree.XMLSchema(etree.parse(str(alto_schema_path())))
    for record in results(out):
        rel = safe_relpath(record["metadata"]["source_path"])
        document = json.loads((out / FILES["json"].format(rel=rel)).read_text())
        jsonschema.validate(document, SCHEMA)
        pages = [p["number"] for p in document["pages"]]

        alto = etree.parse(str(out / FILES["alto"].format(rel=rel)))
        assert alto_schema.validate(alto), (rel, alto_schema.error_log)
        alto_pages = alto.getroot().findall(".//{*}Page")
        assert len(alto_pages) == len(pages)

        hocr = html.parse(str(out / FILES["hocr"].format(rel=rel)))
        assert len(hocr.xpath("//*[@class='ocr_page']")) == len(pages)

        docling = DoclingDocument.load_from_json(out / FILES["docling"].format(rel=rel))
        assert docling.export_to_markdown().strip() or not document["markdown"].strip()

        with pikepdf.open(out / FILES["pdf"].format(rel=rel)) as pdf:
            source = inputs / record["metadata"]["source_path"]
            if source.suffix == ".pdf":
                with pikepdf.open(source) as original:
                    assert len(pdf.pages) == len(original.pages)  # every page kept
            else:
                assert len(pdf.pages) >= 1

        chunks = [
            json.loads(line)
            for line in (out / FILES["chunks"].format(rel=rel)).read_text().splitlines()
        ]
        for chunk in chunks:
            assert chunk["doc_id"] == record["id"] and chunk["text"].strip()
            assert set(chunk["pages"]) <= set(pages)
            assert all(0 <= v <= 1 for box in chunk["boxes"] for v in box["bbox"])


def test_a_rerun_rewrites_nothing(converted: tuple[Path, Path]) -> None:
    inputs, out = converted
    before = _outputs(out)
    again = ocrflow("run", str(inputs), "-o", str(out), "--format", ",".join(FORMATS), "-q")
    assert again.returncode == 0, again.stderr[-3000:]
    assert _outputs(out) == before


def _wait_for_a_done_document(out: Path, proc: subprocess.Popen, deadline_s: float = 300) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and proc.poll() is None:
        if list((out / ".ocrflow" / "done").glob("*.json")):
            return
        time.sleep(0.05)
    pytest.fail("no document finished before the deadline, or the run ended too early")


def test_a_killed_run_writes_each_document_once(tmp_path: Path) -> None:
    # The examples alone: six documents are enough for a kill to land between two.
    inputs = tmp_path / "in"
    shutil.copytree(REPO / "examples", inputs)
    out = tmp_path / "out"
    args = ("run", str(inputs), "-o", str(out), "--format", ",".join(FORMATS), "-q")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ocrflow.cli", *args],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_a_done_document(out, proc)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    done_before = {p.stem for p in (out / ".ocrflow" / "done").glob("*.json")}
    written_before = _outputs(out)
    assert 0 < len(done_before) < len(list(inputs.iterdir())), "the kill should land mid-run"

    again = ocrflow(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    after = _outputs(out)
    records = {r["id"]: r for r in results(out)}
    assert len(records) == len(list(inputs.iterdir()))
    for doc_id in done_before:  # finished before the kill: not one of its files rewritten
        rel = safe_relpath(records[doc_id]["metadata"]["source_path"])
        for pattern in FILES.values():
            key = pattern.format(rel=rel)
            assert after[key] == written_before[key], key
    # Exactly the expected files: one per document and format (no leftovers of the kill).
    expected = {
        pattern.format(rel=safe_relpath(r["metadata"]["source_path"]))
        for r in records.values()
        for pattern in FILES.values()
    } | {f"results/{doc_id}.jsonl" for doc_id in records}
    assert {k for k in after if not k.startswith("figures/")} == expected
