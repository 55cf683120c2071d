"""Object stores and other fsspec locations as a ``Store``.

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
import hashlib
import logging
import time
import uuid
from typing import Any

import fsspec
from fsspec.asyn import sync
from fsspec.spec import AbstractFileSystem

from ocrflow.config.access import BACKEND_EXTRAS, is_url
from ocrflow.config.environment import S3_ENDPOINT_VARIABLE, setting
from ocrflow.errors import MissingExtra, OcrflowError, WorkspaceError

_S3_PROTOCOLS = frozenset({"s3", "s3a"})


# Backends whose single-object writes are atomic (a reader sees the old or the new object).
_OBJECT_STORES = _S3_PROTOCOLS | {"gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "memory"}


# S3 answers 409 ConditionalRequestConflict when conditional writes to one key overlap.
_CONFLICT_RETRIES = 6


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
    endpoint = setting(S3_ENDPOINT_VARIABLE)
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
        backend = BACKEND_EXTRAS.get(protocol)
        if backend is not None:
            raise MissingExtra(f"a {protocol}:// location", *backend) from None
        raise error(f"no fsspec backend for {protocol}:// is installed") from exc
    except (ValueError, OSError) as exc:
        raise error(f"cannot open {redact_url(url)}: {exc}") from exc


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


def redact_url(url: str) -> str:
    """``url`` without user:password, should one be embedded (``s3://key:secret@bucket``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    return f"{scheme}{sep}{netloc}{slash}{tail}"
