"""``ocrflow.results(OUT)``: the finished documents of an OUT, as ``Document``s.

What a document is made of, and who wrote it:

* its done marker (``Workspace.done_records``): status, reason, page routes, statuses,
  sizes, rotations and blocks; written last, so a document with a marker has all its
  outputs, and a running OUT can be read at any time;
* its Dolma JSONL record (``results/<doc id>.jsonl``), for the texts: each page's Markdown
  (cut out of ``text`` with ``pdf_page_numbers``), its blocks with figure links
  (``page_blocks``), and the metadata the record carries. Failed documents have no record:
  their pages come without text.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ocrflow.document import Document, document_from_result
from ocrflow.errors import ConfigError, WorkspaceError
from ocrflow.records import DoneRecord
from ocrflow.sinks.jsonl import results_key
from ocrflow.storage import Store, open_store
from ocrflow.types import DocStatus, DocumentResult
from ocrflow.workspace import Workspace, page_from_dict

#: Record attributes that are per page (they become the pages' fields, not the document's).
_PAGE_ATTRIBUTES = frozenset(
    {"pdf_page_numbers", "page_routes", "page_status", "page_rotation", "page_blocks"}
)


def results(
    out: str | os.PathLike[str],
    *,
    status: str | Iterable[str] | None = None,
) -> Iterator[Document]:
    """Yield the finished documents of ``out`` (a local folder or an fsspec URL such as
    ``s3://bucket/out``), one ``Document`` per done marker, ordered by the name of their
    source within the inputs (``rel``), then by id.

    Each document has its pages (Markdown, blocks, route, status, size, rotation,
    confidence), its status and reason, and ``metadata``: the JSONL record's metadata
    (``Source-File``, ``engine``, ``config_fingerprint``, …) with ``rel`` and
    ``content_sha256`` of the done marker. ``doc.markdown`` is the Markdown file's text
    without its final newline (for a run without ``--page-separator``). Texts come from the
    JSONL records, so an OUT written with ``--format`` lacking ``jsonl`` gives pages
    without text.

    ``status``: only documents with this status (``"ok"``, ``"partial"``, ``"failed"``,
    or several). Works on a running OUT: documents finished so far, each complete.
    Raises ``WorkspaceError`` when ``out`` holds no ocrflow run, ``ConfigError`` for an
    unknown status.
    """
    wanted = _statuses(status)
    store = open_store(os.fspath(out))
    workspace = Workspace(store)
    if not workspace.recorded_config():
        raise WorkspaceError(f"{store.root} holds no ocrflow run")
    records = sorted(workspace.done_records(), key=lambda r: (r.rel or r.source, r.doc_id))
    for record in records:
        if wanted is None or record.status in wanted:
            yield document_of(store, record)


def document_of(store: Store, record: DoneRecord) -> Document:
    """The ``Document`` of one done marker, with the texts of its JSONL record."""
    jsonl = _jsonl_record(store, record.doc_id)
    attributes = jsonl.get("attributes") or {}
    texts = _page_values(jsonl.get("text", ""), attributes.get("pdf_page_numbers"))
    blocks = _page_blocks(attributes)
    pages = []
    for summary in record.pages:
        data = summary.model_dump(mode="json")
        data["text"] = texts.get(summary.page, "")
        if summary.page in blocks:  # the record's blocks carry the figure links
            data["blocks"] = blocks[summary.page]
        pages.append(page_from_dict(data))
    result = DocumentResult(
        record.doc_id,
        record.source,
        record.status,
        tuple(pages),
        page_count=record.page_count,
        reason=record.reason,
        message=record.message,
        attributes={k: v for k, v in attributes.items() if k not in _PAGE_ATTRIBUTES},
    )
    metadata = {
        **(jsonl.get("metadata") or {}),
        "rel": record.rel,
        "content_sha256": record.content_sha256,
    }
    return document_from_result(result, metadata)


def _jsonl_record(store: Store, doc_id: str) -> dict[str, Any]:
    """The document's Dolma record, or ``{}`` (a failed document has none)."""
    blob = store.read_bytes(results_key(doc_id))
    if not blob:
        return {}
    line = blob.decode("utf-8").strip().splitlines()[0]
    record = json.loads(line)
    return record if isinstance(record, dict) else {}


def _page_values(text: str, spans: Iterable[list[int]] | None) -> dict[int, str]:
    """Each page's text, cut out of the record's ``text`` by its ``[start, end, page]``."""
    return {int(page): text[start:end] for start, end, page in spans or ()}


def _page_blocks(attributes: Mapping[str, Any]) -> dict[int, list[Any]]:
    """Each page's blocks (compact rows) from ``page_blocks``, by page number."""
    # Both lists have one entry a page, in the same order (``sinks.jsonl._page_attr``).
    spans = attributes.get("pdf_page_numbers") or ()
    rows = attributes.get("page_blocks") or ()
    return {int(span[2]): row[2] for span, row in zip(spans, rows, strict=False)}


def _statuses(status: str | Iterable[str] | None) -> set[DocStatus] | None:
    if status is None:
        return None
    names = [status] if isinstance(status, str) else list(status)
    try:
        return {DocStatus(name) for name in names}
    except ValueError:
        known = ", ".join(s.value for s in DocStatus)
        raise ConfigError(f"unknown status in {names!r}: use {known}") from None
