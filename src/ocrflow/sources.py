"""Expand inputs (files, directories, globs, ``@list.txt``, fsspec URLs) into sources.

A source's kind is recognised by its first bytes, not by its name.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from ocrflow.errors import SourceError

if TYPE_CHECKING:
    from ocrflow.config import InputOptions

DOCUMENT_SUFFIXES = frozenset(
    {".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp", ".gif", ".jp2"}
)
_SNIFF_BYTES = 1024
_ROW_MARK = "#row="


@dataclass(frozen=True, slots=True)
class Source:
    """One input file. ``rel`` is its path relative to the input that named it."""

    uri: str
    rel: str
    kind: str
    size: int


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
    if b"%PDF-" in head[:_SNIFF_BYTES]:
        return "pdf"
    if head.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*", b"BM")):
        return "image"
    if head.startswith((b"GIF87a", b"GIF89a")) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP"):
        return "image"
    if head.startswith((b"\x00\x00\x00\x0cjP  ", b"\xff\x4f\xff\x51")):
        return "image"
    return "unknown"


def expand_inputs(
    inputs: Iterable[str], *, exclude: Iterable[str] = (), options: InputOptions | None = None
) -> list[Source]:
    """All sources the inputs name, in a stable order, without duplicates.

    Files named explicitly are always kept (an unrecognised one fails later with a reason);
    files found by walking a directory or glob are kept when their content or suffix says
    they are documents. Paths under ``exclude`` (the output directory) are skipped. A dataset
    input (Parquet, ``save_to_disk`` folder) yields one source a row (``options`` picks its
    columns); only ids and sizes are kept, never the rows' bytes.
    """
    excluded = tuple(os.path.realpath(e) for e in exclude if "://" not in e)
    seen: set[str] = set()
    sources: list[Source] = []
    for item in inputs:
        for source in _expand_input(item, options):
            key = source.uri
            if key in seen or _is_under(key, excluded):
                continue
            seen.add(key)
            sources.append(source)
    return sources


def _expand_input(item: str, options: InputOptions | None) -> Iterator[Source]:
    from ocrflow.dataset_source import is_dataset_input, iter_row_sources

    if not item.startswith("@") and is_dataset_input(item):
        column = options.dataset_column if options else None
        id_column = options.dataset_id_column if options else None
        yield from iter_row_sources(item, column=column, id_column=id_column)
    else:
        yield from _expand_one(item)


def _expand_one(item: str) -> Iterator[Source]:
    if item.startswith("@"):
        yield from _expand_list_file(item[1:])
    elif "://" in item and not item.startswith("file://"):
        from ocrflow.remote import expand_remote

        yield from expand_remote(item)
    else:
        yield from _expand_local(item.removeprefix("file://"))


def _expand_list_file(path: str) -> Iterator[Source]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise SourceError(f"cannot read list file {path}: {exc.strerror}") from exc
    for line in lines:
        line = line.strip()
        if line and not line.startswith("#"):
            yield from _expand_one(line)


def _expand_local(item: str) -> Iterator[Source]:
    path = Path(item)
    if path.is_dir():
        yield from _walk(path)
    elif path.exists():
        yield _local_source(path, path.name)
    elif glob.has_magic(item):
        matches = sorted(glob.glob(item, recursive=True))
        if not matches:
            raise SourceError(f"no file matches {item}")
        root = Path(_glob_root(item))
        for match in matches:
            m = Path(match)
            if m.is_dir():
                yield from _walk(m)
            elif m.is_file() and _looks_like_document(m):
                yield _local_source(m, _rel_posix(m, root))
    else:
        raise SourceError(f"no such file or directory: {item}")


def _walk(root: Path) -> Iterator[Source]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.startswith(".") or not path.is_file():
                continue
            if _looks_like_document(path):
                yield _local_source(path, _rel_posix(path, root))


def _looks_like_document(path: Path) -> bool:
    return path.suffix.lower() in DOCUMENT_SUFFIXES or sniff_kind(_head(path)) in {"pdf", "image"}


def _local_source(path: Path, rel: str) -> Source:
    head = _head(path)
    return Source(uri=str(path.resolve()), rel=rel, kind=sniff_kind(head), size=path.stat().st_size)


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(_SNIFF_BYTES)
    except OSError:
        return b""


def _rel_posix(path: Path, root: Path) -> str:
    try:
        return PurePosixPath(path.resolve().relative_to(root.resolve())).as_posix()
    except ValueError:
        return path.name


def _glob_root(pattern: str) -> str:
    parts = Path(pattern).parts
    fixed = [p for p in parts[: next(i for i, p in enumerate(parts) if glob.has_magic(p))]]
    return str(Path(*fixed)) if fixed else "."


def _is_under(uri: str, roots: tuple[str, ...]) -> bool:
    return any(uri == r or uri.startswith(r + os.sep) for r in roots)
