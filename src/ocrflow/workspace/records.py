"""The records a run leaves in its workspace, one definition each: done markers, work items
and their completion, run records, leases.

They are pydantic models: written with ``dump()``, read with ``load()``. Unknown fields are
ignored and missing ones take their defaults, so a workspace written by an older ocrflow
(the same JSON shapes, fewer fields) still resumes, and an older ocrflow reading a newer
workspace ignores what it does not know.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from ocrflow.inputs.source import Source
from ocrflow.types import DocStatus, DocumentResult


class StoredRecord(BaseModel):
    """A record stored as JSON: ``dump()`` to write, ``load()`` to read (older shapes too)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    def dump(self) -> bytes:
        """Compact JSON, UTF-8, as stored."""
        return self.model_dump_json(exclude_none=False).encode()

    @classmethod
    def load(cls, blob: bytes | str) -> Self:
        """Parse a stored record (old shapes included)."""
        return cls.model_validate_json(blob)


class FigureSummary(StoredRecord):
    """A figure of a page as a done marker keeps it (the crop itself is an output file)."""

    page: int
    index: int
    label: str = "image"
    box: tuple[float, ...] = ()


class PageSummary(StoredRecord):
    """One page of a finished document, without its text (that is in the outputs)."""

    page: int
    route: str
    status: str = "ok"
    attempts: int = 0
    error: str | None = None
    reason: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    attributes: dict[str, Any] = Field(default_factory=dict)
    figures: tuple[FigureSummary, ...] = ()
    image_size: dict[str, int] | None = None
    #: The page's blocks in their compact form (``document.rows``; none in markers
    #: written before pages carried blocks).
    blocks: list[Any] = Field(default_factory=list)


class DocumentOutcome(StoredRecord):
    """How a document ended, as every record of a finished document starts."""

    doc_id: str
    source: str
    status: DocStatus = DocStatus.OK
    reason: str | None = None
    message: str | None = None
    page_count: int = 0

    @staticmethod
    def fields_of(result: DocumentResult) -> dict[str, Any]:
        """This record's fields, taken from ``result``."""
        return {
            "doc_id": result.doc_id,
            "source": result.source,
            "status": result.status,
            "reason": result.reason,
            "message": result.message,
            "page_count": result.page_count,
        }


class DoneRecord(DocumentOutcome):
    """A document's done marker: written after its outputs, the proof it needs no work."""

    pages: tuple[PageSummary, ...] = ()
    finished: float = 0.0
    #: The document's output name and content hash, as the run that finished it saw them.
    rel: str = ""
    content_sha256: str = ""


ItemStatus = Literal["done", "split", "range"]

#: The id of a split document's join item is its own id and this (range ids end in
#: ``@first-last``).
JOIN_SUFFIX = "@join"


class WorkItem(StoredRecord):
    """A document (``first == last == 0``), pages ``first..last`` of one, or the joining of
    a split document's ranges into the document (``is_join``)."""

    item_id: str
    uri: str
    rel: str
    kind: str
    size: int
    first: int = 0
    last: int = 0
    #: For range items: the document id every range of the document shares.
    doc_id: str = ""
    #: The source as planning last saw it (``workitems.source_stamp``: size, times, ETag):
    #: a rerun looks closer at an item only when its source's stamp differs.
    stamp: str = ""
    #: Manifest versions of one item: the highest is current (a changed source is planned
    #: again under the same id, with its new stamp, size and kind).
    version: int = 0

    @property
    def is_range(self) -> bool:
        return self.first > 0

    @property
    def is_join(self) -> bool:
        return self.item_id.endswith(JOIN_SUFFIX)

    @property
    def source(self) -> Source:
        return Source(self.uri, self.rel, self.kind, self.size)

    def shard(self, num_shards: int) -> int:
        """A stable shard number for ``--shard-index/--num-shards`` static splits."""
        return int(self.item_id[:8], 16) % num_shards


class ItemDone(StoredRecord):
    """An item needs no more work: its document is done, split into ranges, or its range is
    converted (the document is done when the last range is)."""

    item_id: str
    doc_id: str
    status: ItemStatus = "done"


class RunRecord(StoredRecord):
    """One run's or worker's figures, kept fresh while it works (``ocrflow status``)."""

    run_id: str
    worker: str = "?"
    started: float = 0.0
    finished: float | None = None
    heartbeat: float = 0.0
    elapsed_s: float = 0.0
    documents: dict[str, int] = Field(default_factory=dict)
    documents_skipped: int = 0
    pages: dict[str, int] = Field(default_factory=dict)
    routes: dict[str, int] = Field(default_factory=dict)
    pages_per_s: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_out_per_s: float = 0.0
    leases_lost: int = 0
    workers_lost: int = 0


class LeaseRecord(StoredRecord):
    """Who holds an item and until when (seconds since the epoch)."""

    owner: str
    expires: float
    ttl_s: float = 0.0


def dump_lines(records: list[WorkItem]) -> bytes:
    """Records as JSON lines (a manifest shard)."""
    return "".join(r.model_dump_json() + "\n" for r in records).encode()


def dump_list(records: list[WorkItem]) -> bytes:
    """Records as one JSON array (a document's ranges)."""
    return json.dumps([r.model_dump(mode="json") for r in records]).encode()
