"""What an input is: a ``Source`` (one file, or one row of a dataset) and its kind.

A source's kind is recognised by its first bytes, not by its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

if TYPE_CHECKING:
    pass


DOCUMENT_SUFFIXES = frozenset(
    {".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp", ".gif", ".jp2"}
)


_ROW_MARK = "#row="

#: How many leading bytes tell a source's kind.
SNIFF_BYTES = 1024


@dataclass(frozen=True, slots=True)
class Source:
    """One input file. ``rel`` is its path relative to the input that named it."""

    uri: str
    rel: str
    kind: str
    size: int
    #: An object store's version of it (ETag), when its listing said (``ocrflow.remote``).
    version: str = ""


@dataclass(frozen=True, slots=True)
class RowRef:
    """Where a dataset row lives: the dataset ``location``, the ``shard`` file (relative to
    the dataset's root), the row's ``index`` in it, and its ``row_id``."""

    location: str
    shard: str
    index: int
    row_id: str


def row_uri(ref: RowRef) -> str:
    """``<location>#row=<shard>:<index>:<row id>`` (shard and id percent-encoded): the URI of
    a row as a source; stable, so a rerun finds the same work items."""
    shard, row_id = quote(ref.shard, safe="/"), quote(ref.row_id, safe="")
    return f"{ref.location}{_ROW_MARK}{shard}:{ref.index}:{row_id}"


def parse_row_uri(uri: str) -> RowRef | None:
    """The row a ``row_uri`` names, or ``None`` for any other URI."""
    location, mark, tail = uri.rpartition(_ROW_MARK)
    if not mark:
        return None
    shard, _, rest = tail.partition(":")
    index, _, row_id = rest.partition(":")
    if not index.isdigit():
        return None
    return RowRef(location, unquote(shard), int(index), unquote(row_id))


def row_metadata(uri: str) -> dict[str, object]:
    """What a document's records say of its dataset row (``row_id``, ``dataset_shard``,
    ``dataset_row``); ``{}`` for a document that is not a row."""
    ref = parse_row_uri(uri)
    if ref is None:
        return {}
    return {"row_id": ref.row_id, "dataset_shard": ref.shard, "dataset_row": ref.index}


def sniff_kind(head: bytes) -> str:
    """``pdf``, ``image``, ``empty`` or ``unknown`` from a file's first bytes."""
    if not head:
        return "empty"
    # PDFium accepts up to 1 KiB of junk before the header, as many real files have.
    if b"%PDF-" in head[:SNIFF_BYTES]:
        return "pdf"
    if head.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*", b"BM")):
        return "image"
    if head.startswith((b"GIF87a", b"GIF89a")) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP"):
        return "image"
    if head.startswith((b"\x00\x00\x00\x0cjP  ", b"\xff\x4f\xff\x51")):
        return "image"
    return "unknown"
