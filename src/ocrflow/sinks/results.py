"""``ocrflow.results(OUT)`` and the one reader of an OUT's files.

What a document is made of, and who wrote it:

* its done marker (``Workspace.iter_done_records``): status, reason, page routes, statuses,
  sizes, rotations, figures and blocks; written last, so a document with a marker has all
  its outputs, and a running OUT can be read at any time;
* its Dolma JSONL record (``results/<doc id>.jsonl``, ``DolmaRecord``), for the texts: each
  page's Markdown (cut out of ``text`` with ``pdf_page_numbers``), its blocks with figure
  links (``page_blocks``), and the metadata the record carries. Failed documents have no
  record: their pages come without text.

Everything that reads a finished OUT reads it here, never by parsing its files itself:
review, eval, export, the service's document views and dataset write-back. Memory holds one
document at a time (a marker carries its pages' blocks, so a run's markers together weigh
about as much as its texts):

* ``results(out)``: ``Document``s ordered by their sources' names (the public API);
* ``stored_documents(store)``: ``StoredDocument``s (marker, record, ``Document``) in id
  order, from a store already open;
* ``done_markers(store)``, to choose documents before reading their texts, then
  ``stored_document(store, marker)``; ``done_marker`` and ``find_document`` look one up by id;
* ``markdown_file`` and ``OutputTexts``: a document's text as one output format wrote it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ocrflow.document import Document, document_from_result
from ocrflow.errors import ConfigError, WorkspaceError
from ocrflow.sinks.jsonl import results_key
from ocrflow.sinks.markdown import markdown_key
from ocrflow.storage.local import Store
from ocrflow.storage.open import open_store
from ocrflow.types import DocStatus, DocumentResult
from ocrflow.workspace.records import DoneRecord
from ocrflow.workspace.state import Workspace, page_from_dict

#: Record attributes that are per page (they become the pages' fields, not the document's).
_PAGE_ATTRIBUTES = frozenset(
    {
        "pdf_page_numbers",
        "page_routes",
        "page_status",
        "page_rotation",
        "page_blocks",
        "page_confidence",
    }
)


@dataclass(frozen=True, slots=True)
class DolmaRecord:
    """A document's Dolma JSONL record as the JSONL sink wrote it (``sinks.jsonl``):
    ``text`` is its pages' Markdown joined, ``metadata`` what the run knew of the source,
    ``attributes`` the page spans (``pdf_page_numbers``) with per-page values and figures."""

    id: str
    text: str
    source: str = ""
    added: str | None = None
    created: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, blob: bytes) -> DolmaRecord | None:
        """The record of a JSONL file (its first line); ``None`` when it holds none."""
        lines = blob.decode("utf-8").strip().splitlines()
        data = json.loads(lines[0]) if lines else None
        if not isinstance(data, dict):
            return None
        return cls(
            str(data.get("id", "")),
            str(data.get("text") or ""),
            str(data.get("source") or ""),
            data.get("added"),
            data.get("created"),
            dict(data.get("metadata") or {}),
            dict(data.get("attributes") or {}),
        )

    @property
    def key(self) -> str:
        """Where the record lives in OUT."""
        return results_key(self.id)

    def to_dict(self) -> dict[str, Any]:
        """The record as stored (the keys of ``sinks.jsonl.dolma_record``)."""
        return {
            "id": self.id,
            "text": self.text,
            "source": self.source,
            "added": self.added,
            "created": self.created,
            "metadata": self.metadata,
            "attributes": self.attributes,
        }

    def page_texts(self) -> dict[int, str]:
        """Each page's text, cut out of ``text`` by its ``[start, end, page]`` span."""
        spans = self.attributes.get("pdf_page_numbers") or ()
        return {int(page): self.text[int(start) : int(end)] for start, end, page in spans}

    def page_blocks(self) -> dict[int, list[Any]]:
        """Each page's blocks (compact rows, figure links in place) by page number."""
        # Both lists have one entry a page, in the same order (``sinks.jsonl._page_attr``).
        spans = self.attributes.get("pdf_page_numbers") or ()
        rows = self.attributes.get("page_blocks") or ()
        return {int(span[2]): row[2] for span, row in zip(spans, rows, strict=False)}

    def document_attributes(self) -> dict[str, Any]:
        """The attributes that are the document's (not one value a page)."""
        return {k: v for k, v in self.attributes.items() if k not in _PAGE_ATTRIBUTES}


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """One finished document of an OUT: its done marker, its Dolma record (``None`` for a
    failed document, or a run written without ``jsonl``) and the ``Document`` of both."""

    marker: DoneRecord
    record: DolmaRecord | None
    document: Document


@dataclass(frozen=True, slots=True)
class MarkdownFile:
    """A document's Markdown file as the Markdown sink wrote it: page separators when the
    run asked for them, figure links leading from the file's folder, a final newline."""

    key: str
    text: str


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
    unknown status. Memory holds the names and ids of the run, and one document.
    """
    wanted = _statuses(status)
    store = open_store(os.fspath(out))
    if not Workspace(store).recorded_config():
        raise WorkspaceError(f"{store.root} holds no ocrflow run")
    # Markers are read twice (once for the order, once for the document) rather than held:
    # together they weigh about as much as the run's texts.
    order = sorted((m.rel or m.source, m.doc_id) for m in _chosen(done_markers(store), wanted))
    for _name, doc_id in order:
        marker = done_marker(store, doc_id)
        if marker is not None and (wanted is None or marker.status in wanted):
            yield stored_document(store, marker).document


def stored_documents(
    store: Store, *, status: str | Iterable[str] | None = None
) -> Iterator[StoredDocument]:
    """Every finished document of the OUT in ``store``, in the order of their ids, read one
    at a time (``status`` as for ``results``). An OUT without a recorded run yields nothing
    rather than failing: export and eval tell their users what they expected instead."""
    for marker in _chosen(done_markers(store), _statuses(status)):
        yield stored_document(store, marker)


def done_markers(store: Store) -> Iterator[DoneRecord]:
    """The done markers alone (no texts), one at a time: to choose documents, count them or
    list them before reading any text."""
    return Workspace(store).iter_done_records()


def done_marker(store: Store, doc_id: str) -> DoneRecord | None:
    """The done marker of document ``doc_id``, or ``None`` when it is not finished. The
    caller vouches for ``doc_id`` (an id from OUT, or one checked to be hex)."""
    return Workspace(store).done_record(doc_id)


def find_document(store: Store, doc_id: str) -> StoredDocument | None:
    """Finished document ``doc_id`` (see ``done_marker``), or ``None``."""
    marker = done_marker(store, doc_id)
    return stored_document(store, marker) if marker is not None else None


def stored_document(store: Store, marker: DoneRecord) -> StoredDocument:
    """The document of one done marker, with its JSONL record's texts."""
    record = _dolma_record(store, marker.doc_id)
    return StoredDocument(marker, record, _document(marker, record))


def document_of(store: Store, marker: DoneRecord) -> Document:
    """The ``Document`` of one done marker, with the texts of its JSONL record."""
    return stored_document(store, marker).document


def markdown_file(store: Store, rel: str) -> MarkdownFile | None:
    """The Markdown file of the document named ``rel`` (its marker's ``rel``), or ``None``
    when the run wrote none (failed, or ``--format`` without ``markdown``)."""
    if not rel:
        return None
    key = markdown_key(rel)
    blob = store.read_bytes(key)
    return MarkdownFile(key, blob.decode("utf-8", "replace")) if blob is not None else None


class OutputTexts:
    """A finished document's whole text as the run's outputs hold it: its Markdown file
    (format ``markdown``), else its JSONL record's ``text`` (``jsonl``), else its Parquet
    row's (``parquet`` alone: the run's shards are read once into an id → text map, so
    every text of the run is held in memory)."""

    def __init__(self, store: Store, formats: Iterable[str]) -> None:
        self.store = store
        self.formats = tuple(formats)
        self._parquet: dict[str, str] | None = None

    def text(self, doc_id: str, rel: str) -> str | None:
        """The text of document ``doc_id`` named ``rel``; ``None`` when it has none."""
        if "markdown" in self.formats:
            file = markdown_file(self.store, rel)
            return file.text if file is not None else None
        if "jsonl" in self.formats:
            record = _dolma_record(self.store, doc_id)
            return record.text if record is not None else None
        if self._parquet is None:
            from ocrflow.sinks.parquet import read_documents  # pyarrow: the parquet extra

            table = read_documents(self.store)
            ids, texts = table["id"].to_pylist(), table["text"].to_pylist()
            self._parquet = dict(zip(ids, texts, strict=True))
        return self._parquet.get(doc_id)


def _dolma_record(store: Store, doc_id: str) -> DolmaRecord | None:
    """The document's Dolma record, or ``None`` (a failed document has none). A record
    that is not UTF-8 JSON (a file damaged after the run) is a ``WorkspaceError`` naming
    it, not a traceback."""
    key = results_key(doc_id)
    blob = store.read_bytes(key)
    if not blob:
        return None
    try:
        return DolmaRecord.parse(blob)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise WorkspaceError(f"{key} in {store.root} is not a JSONL record: {exc}") from None


def _document(marker: DoneRecord, record: DolmaRecord | None) -> Document:
    texts = record.page_texts() if record is not None else {}
    blocks = record.page_blocks() if record is not None else {}
    pages = []
    for summary in marker.pages:
        data = summary.model_dump(mode="json")
        data["text"] = texts.get(summary.page, "")
        if summary.page in blocks:  # the record's blocks carry the figure links
            data["blocks"] = blocks[summary.page]
        pages.append(page_from_dict(data))
    result = DocumentResult(
        marker.doc_id,
        marker.source,
        marker.status,
        tuple(pages),
        page_count=marker.page_count,
        reason=marker.reason,
        message=marker.message,
        attributes=record.document_attributes() if record is not None else {},
    )
    metadata = {
        **(record.metadata if record is not None else {}),
        "rel": marker.rel,
        "content_sha256": marker.content_sha256,
    }
    return document_from_result(result, metadata)


def _chosen(markers: Iterable[DoneRecord], wanted: set[DocStatus] | None) -> Iterator[DoneRecord]:
    return (m for m in markers if wanted is None or m.status in wanted)


def _statuses(status: str | Iterable[str] | None) -> set[DocStatus] | None:
    if status is None:
        return None
    names = [status] if isinstance(status, str) else list(status)
    try:
        return {DocStatus(name) for name in names}
    except ValueError:
        known = ", ".join(s.value for s in DocStatus)
        raise ConfigError(f"unknown status in {names!r}: use {known}") from None
