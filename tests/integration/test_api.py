"""The Python API: ``ocrflow.convert`` gives what ``ocrflow run`` writes, ``ocrflow.results``
reads back any OUT (local, on S3, written by the previous main), ``ocrflow.run`` is the
CLI's resumable batch."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import ocrflow
from ocrflow.api import NothingToConvert, UnknownOption
from ocrflow.document import Document, blocks_from_rows
from ocrflow.errors import ConfigError, WorkspaceError
from tests.s3server import S3Endpoint

from .cli_helpers import ocrflow as cli
from .cli_helpers import results as jsonl_records

REPO = Path(__file__).resolve().parents[2]
SCANNED = REPO / "examples" / "scanned.pdf"
OLD_OUT = REPO / "tests" / "data" / "old_out" / "out"


@pytest.fixture(scope="module")
def scanned() -> Document:
    return ocrflow.convert(SCANNED)


@pytest.fixture(scope="module")
def samples_out(samples: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("api") / "out"
    done = cli("run", str(samples), "-o", str(out), "--json")
    assert done.returncode == 0, done.stderr
    return out


def _inside(box: tuple[float, float, float, float]) -> bool:
    x0, y0, x1, y1 = box
    return 0.0 <= x0 <= x1 <= 1.0 and 0.0 <= y0 <= y1 <= 1.0


def _page_texts(record: dict[str, Any]) -> dict[int, str]:
    return {page: record["text"][s:e] for s, e, page in record["attributes"]["pdf_page_numbers"]}


# -- convert -------------------------------------------------------------------------------
@pytest.mark.slow
def test_convert_gives_blocks_in_reading_order_and_the_cli_markdown(
    scanned: Document, tmp_path: Path
) -> None:
    assert scanned.status == "ok" and [p.number for p in scanned.pages] == [1, 2]
    for page in scanned.pages:
        assert page.markdown and page.blocks, page.number
        assert page.size is not None and page.confidence is not None
        cursor = 0
        for block in page.blocks:
            assert block.bbox is not None and _inside(block.bbox), block
            assert all(line.bbox is None or _inside(line.bbox) for line in block.lines)
            # Reading order: each block's text comes after the previous one's in the page.
            first_line = block.text.splitlines()[0]
            found = page.markdown.find(first_line, cursor)
            assert found >= cursor, (first_line, page.markdown)
            cursor = found + len(first_line)
    assert "Quarterly Report on Library Digitisation" in scanned.markdown

    out = tmp_path / "out"
    done = cli("run", str(SCANNED), "-o", str(out))
    assert done.returncode == 0, done.stderr
    written = (out / "markdown" / "scanned.pdf.md").read_text(encoding="utf-8")
    assert written == scanned.markdown + "\n"
    assert not list(tmp_path.glob("ocrflow-convert-*"))  # nothing left where we look


@pytest.mark.slow
def test_convert_takes_bytes_and_pil_images(scanned: Document) -> None:
    from_bytes = ocrflow.convert(SCANNED.read_bytes())
    assert from_bytes.markdown == scanned.markdown
    assert [p.blocks for p in from_bytes.pages] == [p.blocks for p in scanned.pages]

    photo = REPO / "examples" / "invoice-photo.jpg"
    with Image.open(photo) as image:
        from_image = ocrflow.convert(image.convert("RGB"), pages="1")
    assert from_image.status == "ok" and len(from_image.pages) == 1
    assert "INVOICE" in from_image.markdown and from_image.pages[0].blocks
    assert from_image.markdown == ocrflow.convert(photo).markdown


def test_convert_from_a_running_event_loop() -> None:
    """As in a notebook: an event loop runs in this thread, the conversion runs beside it."""
    born_digital = REPO / "examples" / "born-digital.pdf"

    async def main() -> Document:
        return ocrflow.convert(born_digital, text_layer="only", pages="1")

    document = asyncio.run(main())
    assert document.status == "ok" and [p.route for p in document.pages] == ["text_layer"]
    assert document.pages[0].blocks and "Quarterly Report" in document.markdown


def test_convert_refuses_unknown_options_and_bad_values() -> None:
    with pytest.raises(UnknownOption, match=r"'text_layr'.*'text_layer'") as caught:
        ocrflow.convert(SCANNED, text_layr="off")
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ConfigError)
    with pytest.raises(UnknownOption, match="executor"):
        ocrflow.convert(SCANNED, executor="ray")
    with pytest.raises(ConfigError, match="page_timeout"):
        ocrflow.convert(SCANNED, page_timeout=-1)
    with pytest.raises(ConfigError, match="neither a PDF nor an image"):
        ocrflow.convert(b"plain text, no document")
    with pytest.raises(TypeError, match="path, bytes or a PIL image"):
        ocrflow.convert(12)  # type: ignore[arg-type]


# -- results ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_results_reads_back_what_the_run_wrote(samples_out: Path) -> None:
    documents = list(ocrflow.results(samples_out))
    records = {r["id"]: r for r in jsonl_records(samples_out)}
    assert len(documents) == 6 and {d.id for d in documents} == set(records)
    rels = [d.metadata["rel"] for d in documents]
    assert rels == sorted(rels)  # a stable order: by the inputs' names
    for document in documents:
        record = records[document.id]
        assert document.status == record["metadata"]["status"] == "ok"
        assert {k: document.metadata[k] for k in record["metadata"]} == record["metadata"]
        texts = _page_texts(record)
        assert {p.number: p.markdown for p in document.pages} == texts
        markdown = (samples_out / "markdown" / f"{document.metadata['rel']}.md").read_text()
        assert document.markdown + "\n" == markdown
        blocks = {s[1]: s[2] for s in record["attributes"].get("page_blocks", [])}
        spans = {page: end for _s, end, page in record["attributes"]["pdf_page_numbers"]}
        for page in document.pages:
            assert page.blocks == blocks_from_rows(blocks.get(spans[page.number]))
    assert list(ocrflow.results(samples_out, status="failed")) == []
    assert len(list(ocrflow.results(samples_out, status=["ok", "partial"]))) == 6
    with pytest.raises(ConfigError, match="unknown status"):
        list(ocrflow.results(samples_out, status="done"))


def test_results_reads_an_out_of_the_previous_main() -> None:
    (document,) = ocrflow.results(OLD_OUT)  # the unfinished PDF has no done marker
    (record,) = jsonl_records(OLD_OUT)
    assert document.id == record["id"] and document.status == "ok"
    assert {p.number: p.markdown for p in document.pages} == _page_texts(record)
    assert all(page.blocks == () for page in document.pages)  # written before blocks
    round_trip = Document.from_dict(json.loads(json.dumps(document.to_dict())))
    assert round_trip.markdown == document.markdown


def test_a_damaged_record_is_an_error_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(OLD_OUT, out)
    (record,) = (out / "results").glob("*.jsonl")
    record.write_bytes(b"\xff\xfe not UTF-8 JSON\n")
    with pytest.raises(WorkspaceError, match=f"{record.name} .* is not a JSONL record"):
        list(ocrflow.results(out))


def test_results_of_a_folder_without_a_run(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="holds no ocrflow run"):
        list(ocrflow.results(tmp_path))


@pytest.mark.s3
@pytest.mark.slow
def test_results_on_s3(s3_endpoint: S3Endpoint, tmp_path: Path) -> None:
    out = f"s3://{s3_endpoint.new_bucket()}/out"
    done = cli("run", str(SCANNED), "-o", out, env=s3_endpoint.env)
    assert done.returncode == 0, done.stderr
    local = tmp_path / "local"
    assert cli("run", str(SCANNED), "-o", str(local)).returncode == 0

    (remote,) = ocrflow.results(out)
    (here,) = ocrflow.results(local)
    assert remote.id == here.id and remote.markdown == here.markdown
    assert [p.blocks for p in remote.pages] == [p.blocks for p in here.pages]
    assert remote.pages[0].blocks and remote.metadata["rel"] == "scanned.pdf"


# -- run -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_run_is_the_cli_batch_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = ocrflow.run([str(SCANNED)], out, text_layer="auto", pages="1")
    assert first.exit_code == 0
    assert first.stats.documents == {"ok": 1} and first.stats.pages_done == 1
    summary = first.to_dict()
    assert summary["out"]["documents"] == {"ok": 1}

    again = ocrflow.run(SCANNED, out, text_layer="auto", pages="1")
    assert again.exit_code == 0 and again.stats.skipped_documents == 1
    assert again.stats.pages_done == 0

    status = cli("status", str(out), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["documents"] == {"ok": 1}
    # The same options from the CLI give the same configuration: the CLI resumes it too.
    resumed = cli("run", str(SCANNED), "-o", str(out), "--pages", "1", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["documents_skipped"] == 1
    (document,) = ocrflow.results(out)
    assert [p.number for p in document.pages] == [1]


def test_run_with_nothing_to_convert(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("no document here")
    with pytest.raises(NothingToConvert, match="nothing to convert"):
        ocrflow.run(tmp_path, tmp_path / "out")
