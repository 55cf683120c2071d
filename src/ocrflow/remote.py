"""Object stores and other fsspec locations: a ``Store``, input expansion, local copies.

Credentials and endpoints come from the environment, as s3fs/botocore read them
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``,
``AWS_ENDPOINT_URL``, ``FSSPEC_S3_*``), plus ``OCRFLOW_S3_ENDPOINT_URL``, or from explicit
``storage_options``. Nothing here logs or formats them into messages.

Atomicity: object stores write an object whole, so one PUT is an atomic write. Exclusive
creation and compare-and-swap use S3 conditional writes (``If-None-Match: *`` and
``If-Match: <etag>``). Other backends fall back to check-then-write, which is racy; the
docstrings say where.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import fsspec
from fsspec.asyn import sync
from fsspec.callbacks import Callback
from fsspec.spec import AbstractFileSystem

from ocrflow.access import AccessPolicy, check_size, is_url
from ocrflow.errors import OcrflowError, SourceError, WorkspaceError
from ocrflow.sources import DOCUMENT_SUFFIXES, Source, sniff_kind
from ocrflow.types import Reason

_S3_PROTOCOLS = frozenset({"s3", "s3a"})
# Backends whose single-object writes are atomic (a reader sees the old or the new object).
_OBJECT_STORES = _S3_PROTOCOLS | {"gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "memory"}
_SNIFF_BYTES = 1024
# Heads read concurrently per batch: bounds memory to ~256 KiB however long the listing.
_SNIFF_BATCH = 256
# S3 answers 409 ConditionalRequestConflict when conditional writes to one key overlap.
_CONFLICT_RETRIES = 6
_COPY_PREFIX = "ocrflow-"
log = logging.getLogger("ocrflow.remote")


def is_remote(location: str) -> bool:
    """Whether ``location`` is an fsspec URL other than a local path or ``file://``."""
    return is_url(location)


def filesystem(
    url: str,
    storage_options: dict[str, Any] | None = None,
    *,
    error: type[OcrflowError] = WorkspaceError,
) -> tuple[AbstractFileSystem, str]:
    """The fsspec filesystem serving ``url`` and the path of ``url`` inside it."""
    options = dict(storage_options or {})
    protocol = url.split("://", 1)[0]
    endpoint = os.environ.get("OCRFLOW_S3_ENDPOINT_URL")
    client_kwargs = options.get("client_kwargs") or {}
    if (
        protocol in _S3_PROTOCOLS
        and endpoint
        and "endpoint_url" not in options
        and "endpoint_url" not in client_kwargs
    ):
        options["endpoint_url"] = endpoint
    try:
        return fsspec.core.url_to_fs(url, **options)
    except ImportError as exc:
        extra = " (pip install 'ocrflow[s3]')" if protocol in _S3_PROTOCOLS else ""
        raise error(f"no fsspec backend for {protocol}:// is installed{extra}") from exc
    except (ValueError, OSError) as exc:
        raise error(f"cannot open {_redact(url)}: {exc}") from exc


class FsspecStore:
    """A ``Store`` under any fsspec URL root (``s3://bucket/out``, ``gs://…``, ``memory://…``).

    Keys are ``/``-separated paths relative to ``root``. Listings are never served from
    fsspec's directory cache: other workers write to the same workspace.
    """

    def __init__(self, root: str, *, storage_options: dict[str, Any] | None = None) -> None:
        self.root = root.rstrip("/")
        self.protocol = self.root.split("://", 1)[0]
        self.fs, base = filesystem(self.root, storage_options, error=WorkspaceError)
        self._base = base.rstrip("/")
        self._s3 = self.protocol in _S3_PROTOCOLS and hasattr(self.fs, "call_s3")

    # -- paths ---------------------------------------------------------------------------
    def _path(self, key: str) -> str:
        parts = key.split("/")
        if not key or any(p in {"", ".", ".."} for p in parts):
            raise WorkspaceError(f"refusing an unsafe key: {key!r}")
        return f"{self._base}/{key}"

    def url(self, key: str) -> str:
        """The full URL of ``key``."""
        self._path(key)
        return f"{self.root}/{key}"

    # -- plain operations ----------------------------------------------------------------
    def read_bytes(self, key: str) -> bytes | None:
        """The object's bytes, or ``None`` when it does not exist."""
        path = self._path(key)
        try:
            return self.fs.cat_file(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise WorkspaceError(f"cannot read {self.url(key)}: {exc}") from exc

    def write_bytes(self, key: str, data: bytes) -> None:
        """Write ``data`` atomically: one whole-object PUT on object stores.

        Other backends (sftp, hdfs, …) get a temporary object renamed into place, which is
        as atomic as the backend's rename.
        """
        path = self._path(key)
        try:
            if self.protocol in _OBJECT_STORES:
                self.fs.pipe_file(path, data)
            else:
                self._write_renamed(path, data)
        except OSError as exc:
            raise WorkspaceError(f"cannot write {self.url(key)}: {exc}") from exc
        finally:
            self.fs.invalidate_cache(path)

    def _write_renamed(self, path: str, data: bytes) -> None:
        parent, _, name = path.rpartition("/")
        tmp = f"{parent}/.tmp-{uuid.uuid4().hex}-{name}"
        self.fs.pipe_file(tmp, data)
        try:
            self.fs.mv(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                self.fs.rm_file(tmp)
            raise

    def exists(self, key: str) -> bool:
        """Whether the object exists (asked of the store, not of a cached listing)."""
        path = self._path(key)
        self.fs.invalidate_cache(path)
        try:
            return bool(self.fs.exists(path))
        except OSError as exc:
            raise WorkspaceError(f"cannot check {self.url(key)}: {exc}") from exc

    def list(self, prefix: str) -> list[str]:
        """Keys directly or indirectly under ``prefix``, relative to the root, sorted."""
        prefix = prefix.strip("/")
        base = f"{self._base}/{prefix}" if prefix else self._base
        self.fs.invalidate_cache(base)
        try:
            found = self.fs.find(base)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise WorkspaceError(f"cannot list {self.root}/{prefix}: {exc}") from exc
        start = len(self._base) + 1
        keys = (
            path[start:]
            for path in found
            if path.startswith(base + "/") and not path.rsplit("/", 1)[-1].startswith(".tmp-")
        )
        return sorted(keys)

    def delete(self, key: str) -> None:
        """Remove the object; a missing one is not an error."""
        path = self._path(key)
        try:
            self.fs.rm_file(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise WorkspaceError(f"cannot delete {self.url(key)}: {exc}") from exc
        finally:
            self.fs.invalidate_cache(path)

    # -- conditional operations ----------------------------------------------------------
    def create_exclusive(self, key: str, data: bytes) -> bool:
        """Create the object only if it does not exist; ``False`` if it already did.

        S3: a PUT with ``If-None-Match: *`` — atomic, exactly one concurrent creator wins.
        A lost response retried by botocore can read as ``False`` for the winner: safe (no
        two owners), at worst a lease is taken up only after it expires. Backends whose
        ``pipe_file(mode="create")`` is native are atomic too (memory, recent gcsfs);
        fsspec's default for the rest checks existence first and is racy.
        """
        path = self._path(key)
        if self._s3:
            return self._s3_put(path, data, IfNoneMatch="*")
        try:
            self.fs.pipe_file(path, data, mode="create")
        except FileExistsError:
            return False
        except OSError as exc:
            raise WorkspaceError(f"cannot create {self.url(key)}: {exc}") from exc
        finally:
            self.fs.invalidate_cache(path)
        return True

    def read_with_version(self, key: str) -> tuple[bytes | None, str | None]:
        """The object's bytes and a version token for ``write_if_match``; ``(None, None)``
        when it does not exist.

        S3: bytes and ETag come from one GET, so they always belong together. Elsewhere the
        token is ``sha256:<hex>`` of the bytes.
        """
        if self._s3:
            return self._s3_get(self._path(key))
        data = self.read_bytes(key)
        return (data, _content_version(data)) if data is not None else (None, None)

    def write_if_match(self, key: str, data: bytes, etag: str | None) -> bool:
        """Replace the object only if it still has version ``etag`` (``None``: only if it
        does not exist). ``False`` when someone else changed or removed it meanwhile.

        S3: a PUT with ``If-Match: <etag>`` — atomic. Other backends compare and then
        write, which is racy: two writers holding the same version may both succeed.
        """
        if etag is None:
            return self.create_exclusive(key, data)
        if self._s3:
            return self._s3_put(self._path(key), data, IfMatch=etag)
        current = self.read_bytes(key)
        if current is None or _content_version(current) != etag:
            return False
        self.write_bytes(key, data)
        return True

    # -- S3 specifics --------------------------------------------------------------------
    def _s3_put(self, path: str, data: bytes, **condition: str) -> bool:
        bucket, key, _ = self.fs.split_path(path)
        try:
            for attempt in range(_CONFLICT_RETRIES):
                try:
                    self.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, **condition)
                    return True
                except OSError as exc:
                    code = _s3_error_code(exc)
                    if code in {"PreconditionFailed", "NoSuchKey"} or isinstance(
                        exc, FileExistsError
                    ):
                        return False  # the condition failed: someone else holds the key
                    if code != "ConditionalRequestConflict":
                        raise WorkspaceError(
                            f"cannot write {self.root}/{self._rel(path)}: {exc}"
                        ) from exc
                time.sleep(0.05 * 2**attempt)
            raise WorkspaceError(
                f"conditional write to {self.root}/{self._rel(path)} kept conflicting"
            )
        finally:
            self.fs.invalidate_cache(path)

    def _s3_get(self, path: str) -> tuple[bytes | None, str | None]:
        bucket, key, _ = self.fs.split_path(path)

        async def get() -> tuple[bytes, str]:
            response = await self.fs._call_s3("get_object", Bucket=bucket, Key=key)
            body = response["Body"]
            try:
                return await body.read(), response["ETag"]
            finally:
                body.close()

        try:
            return sync(self.fs.loop, get)
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            raise WorkspaceError(f"cannot read {self.root}/{self._rel(path)}: {exc}") from exc

    def _rel(self, path: str) -> str:
        return path[len(self._base) + 1 :]


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
        raise SourceError(f"no object matches {_redact(url)}")
    root = _glob_root(pattern)
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
            [min(entries[i].size, _SNIFF_BYTES) for i in todo],
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


def _glob_root(pattern: str) -> str:
    parts = pattern.split("/")
    fixed = parts[: next(i for i, p in enumerate(parts) if glob.has_magic(p))]
    return "/".join(fixed)


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
    fs.get_file(path, tmp, callback=_CappedCopy(_redact(uri), cap))


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
    check_size(_redact(uri), size, max_bytes)


@contextlib.contextmanager
def _source_errors(url: str) -> Iterator[None]:
    """Translate backend errors into ``SourceError`` at this boundary."""
    try:
        yield
    except SourceError:
        raise
    except FileNotFoundError as exc:
        raise SourceError(
            f"no such object or prefix: {_redact(url)}", reason=Reason.UNREADABLE
        ) from exc
    except OSError as exc:
        raise SourceError(f"cannot read {_redact(url)}: {exc}", reason=Reason.UNREADABLE) from exc
    except backend_errors() as exc:  # no credentials, an endpoint that does not answer
        raise SourceError(
            f"cannot read {_redact(url)}: {backend_message(exc)}", reason=Reason.UNREADABLE
        ) from exc


def backend_errors() -> tuple[type[BaseException], ...]:
    """Errors of an object store's client that are not ``OSError`` (botocore's: no
    credentials, endpoint unreachable), when that client is installed."""
    try:
        from botocore.exceptions import BotoCoreError
    except ImportError:
        return ()
    return (BotoCoreError,)


def backend_message(exc: BaseException) -> str:
    """What to tell a user about a client error, with what to do for missing credentials."""
    if type(exc).__name__ == "NoCredentialsError":
        return (
            "no credentials for the object store (set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)"
        )
    return str(exc) or type(exc).__name__


# -- helpers -----------------------------------------------------------------------------
def _content_version(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _s3_error_code(exc: BaseException) -> str | None:
    """The S3 error code behind an s3fs exception (s3fs chains the botocore error)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        response = getattr(current, "response", None)
        if isinstance(response, dict):
            return response.get("Error", {}).get("Code")
        current = current.__cause__ or current.__context__
    return None


def _redact(url: str) -> str:
    """``url`` without user:password, should one be embedded (``s3://key:secret@bucket``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    return f"{scheme}{sep}{netloc}{slash}{tail}"
