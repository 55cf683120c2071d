"""Inputs on object stores and other fsspec locations: expansion into sources (listing,
globs, kind sniffed in batches of ranged reads) and size-capped local copies for workers.

Credentials and endpoints come from the environment, as s3fs/botocore read them, or from
explicit ``storage_options`` (see ``storage/fsspec_store.py``). Nothing here logs or formats
them into messages: URLs in messages go through ``redact_url``.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from fsspec.callbacks import Callback
from fsspec.spec import AbstractFileSystem

from ocrflow.config.access import AccessPolicy, check_size
from ocrflow.errors import SourceError
from ocrflow.inputs.globs import glob_root
from ocrflow.inputs.source import DOCUMENT_SUFFIXES, SNIFF_BYTES, Source, sniff_kind
from ocrflow.storage.fsspec_store import (
    backend_errors,
    backend_message,
    filesystem,
    is_remote,
    redact_url,
)
from ocrflow.types import Reason

# Heads read concurrently per batch: bounds memory to ~256 KiB however long the listing.
_SNIFF_BATCH = 256


_COPY_PREFIX = "ocrflow-"


log = logging.getLogger("ocrflow.remote")


# -- inputs ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Entry:
    path: str  # inside the filesystem, no protocol
    rel: str
    size: int
    explicit: bool  # named by the user: kept whatever it holds
    version: str = ""  # the listing's ETag (or modification time): a changed object differs


def expand_remote(
    url: str,
    *,
    storage_options: dict[str, Any] | None = None,
    access: AccessPolicy | None = None,
) -> Iterator[Source]:
    """Sources under an fsspec URL: a prefix (every object below it, recursively), a glob
    (``s3://b/p/*.pdf``, ``**`` allowed) or a single object.

    ``rel`` is the key relative to the prefix (or to the glob's fixed part, or the object's
    name). Objects whose name, or any folder below the prefix, starts with ``.`` are
    skipped; found objects are kept when their suffix or first bytes say they are documents,
    a single named object always. The kind is sniffed from each object's first KiB, read
    concurrently in batches: one listing plus one small ranged GET per object.

    ``access``: a restricted policy checks ``url`` and every object a listing or glob
    finds (an object it refuses is skipped unread), and HTTP follows no redirect.
    """
    access = access or AccessPolicy()
    access.check_uri(url)
    options = {**access.storage_options(url), **(storage_options or {})}
    fs, path = filesystem(url, options, error=SourceError)
    with _source_errors(url):
        entries = _list_entries(fs, path.rstrip("/") if path != "/" else path, url)
    if access.restricted:
        entries = _allowed_entries(fs, entries, access)
    for batch in _batches(entries, _SNIFF_BATCH):
        with _source_errors(url):
            kinds = _sniff_batch(fs, batch)
        for entry, kind in zip(batch, kinds, strict=True):
            if entry.explicit or _is_document_name(entry.path) or kind in {"pdf", "image"}:
                yield Source(
                    uri=fs.unstrip_protocol(entry.path),
                    rel=entry.rel,
                    kind=kind,
                    size=entry.size,
                    version=entry.version,
                )


def _allowed_entries(
    fs: AbstractFileSystem, entries: list[_Entry], access: AccessPolicy
) -> list[_Entry]:
    """The entries whose URL the policy allows (a listing may name anything: an HTML
    index links to ``../x`` or to other hosts)."""
    allowed = []
    for entry in entries:
        try:
            access.check_uri(fs.unstrip_protocol(entry.path))
        except SourceError:
            log.info("skipped an object outside the allowed prefixes: %s", entry.rel)
            continue
        allowed.append(entry)
    return allowed


def _list_entries(fs: AbstractFileSystem, path: str, url: str) -> list[_Entry]:
    if glob.has_magic(path):
        return _glob_entries(fs, path, url)
    fs.invalidate_cache(path)
    info = fs.info(path)  # FileNotFoundError when nothing is there
    if info.get("type") == "file" and not url.endswith("/"):
        return [_Entry(path, path.rsplit("/", 1)[-1], _size(info), True, _version(info))]
    return _walk_entries(fs, path)


def _walk_entries(fs: AbstractFileSystem, root: str, rel_to: str | None = None) -> list[_Entry]:
    """Every visible object below ``root``, ``rel`` taken against ``rel_to`` (or ``root``)."""
    root = root.rstrip("/")
    found = fs.find(root, detail=True)
    return [
        entry
        for path, info in sorted(found.items())
        if info.get("type", "file") == "file" and path.startswith(root + "/")
        for entry in _visible(path, rel_to if rel_to is not None else root, info)
    ]


def _glob_entries(fs: AbstractFileSystem, pattern: str, url: str) -> list[_Entry]:
    matches = fs.glob(pattern, detail=True)
    if not matches:
        raise SourceError(f"no object matches {redact_url(url)}")
    root = glob_root(pattern)
    # ``**`` matches folders and the objects in them: keep each object once, and take every
    # rel against the pattern's fixed part so two matched folders cannot collide.
    entries: dict[str, _Entry] = {}
    for path, info in sorted(matches.items()):
        if info.get("type") == "directory":
            found = _walk_entries(fs, path, root)
        else:
            found = _visible(path, root, info)
        for entry in found:
            entries.setdefault(entry.path, entry)
    return sorted(entries.values(), key=lambda e: e.path)


def _visible(path: str, root: str, info: dict[str, Any]) -> list[_Entry]:
    """The object as a found entry, or nothing when it is hidden below ``root``."""
    rel = path[len(root) + 1 :] if root and path.startswith(root + "/") else path
    if not rel or _hidden(rel):
        return []
    return [_Entry(path, rel, _size(info), False, _version(info))]


def _sniff_batch(fs: AbstractFileSystem, entries: list[_Entry]) -> list[str]:
    """Each entry's kind from its first KiB, read concurrently (sync backends: in turn)."""
    kinds = ["empty" if e.size == 0 else "" for e in entries]
    todo = [i for i, kind in enumerate(kinds) if not kind]
    if todo:
        heads = fs.cat_ranges(
            [entries[i].path for i in todo],
            [0] * len(todo),
            [min(entries[i].size, SNIFF_BYTES) for i in todo],
            on_error="return",
        )
        for i, head in zip(todo, heads, strict=True):
            # An unreadable head: trust the name and let opening the document say what's wrong.
            kinds[i] = (
                sniff_kind(head) if isinstance(head, bytes) else _kind_from_name(entries[i].path)
            )
    return kinds


def _batches(items: Sequence[_Entry], size: int) -> Iterator[list[_Entry]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def _hidden(rel: str) -> bool:
    return any(part.startswith(".") for part in rel.split("/"))


def _is_document_name(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in DOCUMENT_SUFFIXES


def _kind_from_name(path: str) -> str:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix == ".pdf":
        return "pdf"
    return "image" if suffix in DOCUMENT_SUFFIXES else "unknown"


def _version(info: dict[str, Any]) -> str:
    """What a listing says of an object's version: its ETag (S3, GCS, Azure), else its
    modification time; ``""`` when it says neither."""
    for key in ("ETag", "etag", "md5Hash", "VersionId", "LastModified", "mtime", "updated"):
        if info.get(key):
            return str(info[key])
    return ""


def _size(info: dict[str, Any]) -> int:
    return int(info.get("size") or info.get("Size") or 0)


# -- local copies ------------------------------------------------------------------------
@contextlib.contextmanager
def local_copy(
    uri: str,
    *,
    max_bytes: int | None = None,
    storage_options: dict[str, Any] | None = None,
    access: AccessPolicy | None = None,
) -> Iterator[str]:
    """A local file path holding ``uri``'s bytes, for code that needs a real file (PDFium).

    Local paths and ``file://`` URLs are yielded as they are (restricted: their real path,
    checked again now), when they are regular files: a device or FIFO is never read.
    Remote objects are streamed to a temporary file (never whole in memory), removed on
    exit. Raises ``SourceError``: reason ``too_large`` when the file exceeds ``max_bytes``
    or the policy's cap, ``path_not_allowed`` when the policy refuses it, ``unreadable``
    when it cannot be fetched.
    """
    access = access or AccessPolicy()
    caps = [c for c in (max_bytes, access.max_file_bytes) if c is not None]
    cap = min(caps) if caps else None
    if not is_remote(uri):
        path = uri.removeprefix("file://")
        if os.path.lexists(path) or access.restricted:  # a missing one: the opener says so
            path = access.check_local_file(path, capped=False)
            _check_size(uri, _local_size(path), cap)
        yield path
        return
    access.check_uri(uri)
    options = {**access.storage_options(uri), **(storage_options or {})}
    fs, path = filesystem(uri, options, error=SourceError)
    fd, tmp = tempfile.mkstemp(prefix=_COPY_PREFIX, suffix=PurePosixPath(path).suffix)
    os.close(fd)
    try:
        with _source_errors(uri):
            _fetch(fs, path, tmp, uri, cap)
        # The object may have been replaced by a bigger one between the check and the GET.
        _check_size(uri, os.path.getsize(tmp), cap)
        yield tmp
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _fetch(fs: AbstractFileSystem, path: str, tmp: str, uri: str, cap: int | None) -> None:
    """Stream the object to ``tmp``; with a cap, the copy stops at the first chunk past it
    whatever size the store announced (a server may send more than it said)."""
    if cap is None:
        fs.get_file(path, tmp)
        return
    _check_size(uri, int(fs.size(path) or 0), cap)
    fs.get_file(path, tmp, callback=_CappedCopy(redact_url(uri), cap))


class _CappedCopy(Callback):
    """fsspec's progress callback, used to stop a copy that grows past ``cap`` bytes."""

    def __init__(self, shown: str, cap: int) -> None:
        super().__init__()
        self.shown, self.cap = shown, cap

    def call(self, hook_name: str | None = None, **kwargs: Any) -> None:
        check_size(self.shown, max(self.value, self.size or 0), self.cap)


def _local_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0  # missing or unreadable: the opener reports it with its own reason


def _check_size(uri: str, size: int, max_bytes: int | None) -> None:
    check_size(redact_url(uri), size, max_bytes)


@contextlib.contextmanager
def _source_errors(url: str) -> Iterator[None]:
    """Translate backend errors into ``SourceError`` at this boundary."""
    try:
        yield
    except SourceError:
        raise
    except FileNotFoundError as exc:
        raise SourceError(
            f"no such object or prefix: {redact_url(url)}", reason=Reason.UNREADABLE
        ) from exc
    except OSError as exc:
        message = f"cannot read {redact_url(url)}: {exc}"
        raise SourceError(message, reason=Reason.UNREADABLE) from exc
    except backend_errors() as exc:  # no credentials, an endpoint that does not answer
        raise SourceError(
            f"cannot read {redact_url(url)}: {backend_message(exc)}", reason=Reason.UNREADABLE
        ) from exc
