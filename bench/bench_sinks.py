"""The cost of each output format per page, against the JSONL sink, in one run.

    .venv/bin/python bench/bench_sinks.py [--repeat 5] [--formats json,pdf,...]

Documents: the bundled examples and a few corpus documents (scans, born-digital, rotated,
tables), converted once with the embedded engine (``--format json``); their documents are
read back from the json output, so every sink gets the same pages, blocks and boxes as in
a run. Then each format's sink writes every document ``--repeat`` times into a fresh
local OUT, and its time is taken (the best of the repeats, CPU time of this process and
its threads: the sinks run in the worker's threads). Prints ms a page and the ratio to the
JSONL sink's ms a page measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ocrflow.document import Document
from ocrflow.inputs.source import sniff_kind
from ocrflow.sinks import (
    KNOWN_FORMATS,
    DocumentMeta,
    FinishedDocument,
    OriginalFile,
    SinkContext,
    format_sink,
)
from ocrflow.storage.local import LocalStore
from ocrflow.types import DocumentResult, PageResult

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
DOCUMENTS = (
    "images/tesseract__phototest.tif",
    "images/docling__old_newspaper.png",
    "pdfs/pdf2image__test_241.pdf",
    "pdfs/unstructured__DA-619p.pdf",
)


def _convert(folder: Path, out: Path) -> list[FinishedDocument]:
    """Run ``ocrflow run`` once and read its documents back from the json output."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "ocrflow.cli", "run", str(folder), "-o", str(out), "-q"),
            *("--format", "json", "--pages", "1-4"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"ocrflow run failed: {done.stderr[-2000:]}")
    documents = []
    for path in sorted((out / "json").rglob("*.json")):
        document = Document.from_dict(json.loads(path.read_text()))
        documents.append(_finished(document, folder))
    return documents


def _finished(document: Document, folder: Path) -> FinishedDocument:
    pages = tuple(
        PageResult(
            p.number,
            p.markdown,
            p.route,
            p.status,
            attributes=dict(p.attributes),
            image_size=p.size,
            blocks=p.blocks,
        )
        for p in document.pages
    )
    result = DocumentResult(
        document.id, document.source, document.status, pages, document.page_count
    )
    rel = str(document.metadata.get("rel") or Path(document.source).name)
    meta = DocumentMeta(rel, "0" * 64, None, "embedded", "bench")
    source = folder / rel
    kind = sniff_kind(source.read_bytes()[:64]) if source.is_file() else "pdf"
    return FinishedDocument(result, meta, OriginalFile(str(source), kind))


def _time(fmt: str, documents: list[FinishedDocument], repeat: int, tmp: Path) -> float:
    """Best CPU seconds over ``repeat`` rounds for one format's sink to write everything."""
    best = float("inf")
    for attempt in range(repeat):
        out = tmp / f"{fmt}-{attempt}"
        context = SinkContext(LocalStore(str(out)), "bench", False, lambda ids: None)
        sink = format_sink(fmt, context)
        started = time.process_time()
        for document in documents:
            sink.write(document)
        sink.close()
        best = min(best, time.process_time() - started)
        shutil.rmtree(out, ignore_errors=True)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--formats", default=",".join(KNOWN_FORMATS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        folder = tmp / "in"
        folder.mkdir()
        for source in sorted((REPO / "examples").iterdir()):
            shutil.copyfile(source, folder / source.name)
        for name in DOCUMENTS:
            if (CORPUS / name).is_file():
                shutil.copyfile(CORPUS / name, folder / Path(name).name)
        documents = _convert(folder, tmp / "converted")
        pages = sum(len(d.result.pages) for d in documents)
        print(f"{len(documents)} documents, {pages} pages; best of {args.repeat}")
        baseline = _time("jsonl", documents, args.repeat, tmp) / pages
        print(f"{'format':10} {'ms/page':>9} {'x jsonl':>8}")
        for fmt in args.formats.split(","):
            try:
                per_page = _time(fmt, documents, args.repeat, tmp) / pages
            except Exception as exc:
                print(f"{fmt:10} {'-':>9} {'-':>8}  ({type(exc).__name__}: {exc})")
                continue
            print(f"{fmt:10} {per_page * 1000:9.2f} {per_page / baseline:8.1f}")


if __name__ == "__main__":
    main()
