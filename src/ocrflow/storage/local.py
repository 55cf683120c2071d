"""Byte storage under one local directory, and the ``Store`` protocol every store keeps.

Every write is atomic: a reader sees the old object or the new one, never half of one.
Locally that is a temp file and ``os.replace``; object stores write objects whole
(``storage/fsspec_store.py``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from ocrflow.errors import OutputError, WorkspaceError

log = logging.getLogger(__name__)


class Store(Protocol):
    """The few operations the workspace and sinks need."""

    root: str

    def read_bytes(self, key: str) -> bytes | None: ...

    def write_bytes(self, key: str, data: bytes) -> None: ...

    def create_exclusive(self, key: str, data: bytes) -> bool: ...

    def exists(self, key: str) -> bool: ...

    def read_with_version(self, key: str) -> tuple[bytes | None, str | None]: ...

    def write_if_match(self, key: str, data: bytes, etag: str | None) -> bool: ...

    def list(self, prefix: str) -> list[str]: ...

    def delete(self, key: str) -> None: ...

    def url(self, key: str) -> str: ...


class LocalStore:
    """A store in a local directory.

    Every OS error on OUT (disk full, read-only file system, no permission, a name too long)
    is raised as ``OutputError`` naming the path: the run cannot go on usefully, and the CLI
    reports it in one line. A failed write leaves no temp file and no partial object behind.
    """

    def __init__(self, root: str | os.PathLike[str], *, lock_wait_s: float = 10.0) -> None:
        self.root = str(Path(root).resolve())
        self.lock_wait_s = lock_wait_s
        # Temp files live apart from the outputs, so a write killed halfway never leaves a
        # partial file where a reader globbing results/*.jsonl would find it. The folder is
        # made on the first write: reading a run (``ocrflow status``) works on a read-only OUT.
        self._tmp = Path(self.root, TMP_DIR)
        self._tmp_ready = False

    def _path(self, key: str) -> Path:
        path = Path(self.root, key).resolve()
        if not str(path).startswith(self.root + os.sep) and str(path) != self.root:
            raise WorkspaceError(f"refusing to write outside the output directory: {key!r}")
        return path

    def _tmp_dir(self) -> Path:
        if not self._tmp_ready:
            self._tmp.mkdir(parents=True, exist_ok=True)
            _sweep_stale(self._tmp)
            self._tmp_ready = True
        return self._tmp

    def _temp_file(self, data: bytes, suffix: str = "") -> str:
        """A temp file holding ``data``, flushed to disk; removed again if writing fails
        (a disk-full write must not leave the rest of a full disk's space taken)."""
        fd, tmp = create_temp(self._tmp_dir(), prefix="w-", suffix=suffix)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:
            _remove(tmp)
            raise
        return tmp

    def read_bytes(self, key: str) -> bytes | None:
        """The object's bytes, or ``None`` when it does not exist."""
        path = self._path(key)
        with output_errors(path, "read"):
            try:
                return path.read_bytes()
            except FileNotFoundError:
                return None

    def write_bytes(self, key: str, data: bytes) -> None:
        """Write ``data`` atomically (temp file, fsync, rename over the old object)."""
        path = self._path(key)
        with output_errors(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._temp_file(data, suffix=path.suffix[:16])
            try:
                os.replace(tmp, path)
            except BaseException:
                _remove(tmp)
                raise

    def create_exclusive(self, key: str, data: bytes) -> bool:
        """Create the object only if it does not exist; ``False`` if it already did."""
        path = self._path(key)
        with output_errors(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._temp_file(data)
            try:
                os.link(tmp, path)  # atomic and fails if the name exists
                return True
            except FileExistsError:
                return False
            finally:
                _remove(tmp)

    def exists(self, key: str) -> bool:
        path = self._path(key)
        with output_errors(path, "read"):
            return path.exists()

    def read_with_version(self, key: str) -> tuple[bytes | None, str | None]:
        """The bytes and a version token (their SHA-256) for ``write_if_match``."""
        data = self.read_bytes(key)
        return (data, _version(data)) if data is not None else (None, None)

    def write_if_match(self, key: str, data: bytes, etag: str | None) -> bool:
        """Replace the object only if it still has version ``etag`` (``None``: only if absent).

        An exclusive ``flock`` on a sidecar lock file makes compare-and-write atomic for every
        process on this machine (leases between local workers rely on it). A lock still taken
        after ``lock_wait_s`` also answers ``False``: its holder is most likely a process
        stopped inside it (SIGSTOP, a frozen container), and waiting for it would stop this
        one too. Callers already take ``False`` as "someone else's now": a claim passes the
        item by, a renewal gives the item up, and neither can write over the stopped writer.
        """
        if etag is None:
            return self.create_exclusive(key, data)
        path = self._path(key)
        lock = path.with_name(path.name + ".lock")
        with output_errors(lock), _locked(lock, self.lock_wait_s) as taken:
            if not taken:
                log.warning("%s stayed locked for %.0f s; taken as changed", path, self.lock_wait_s)
                return False
            current = self.read_bytes(key)
            if current is None or _version(current) != etag:
                return False
            self.write_bytes(key, data)
            return True

    def list(self, prefix: str) -> list[str]:
        """Keys directly or indirectly under ``prefix``, relative to the root, sorted."""
        base = self._path(prefix)
        with output_errors(base, "read"):
            if not base.is_dir():
                return []
            return sorted(
                str(p.relative_to(self.root)).replace(os.sep, "/")
                for p in base.rglob("*")
                if p.is_file() and p.suffix != ".lock"
            )

    def delete(self, key: str) -> None:
        path = self._path(key)
        with output_errors(path, "delete"):
            _remove(path)

    def url(self, key: str) -> str:
        return str(self._path(key))


@contextlib.contextmanager
def output_errors(path: Path | str, action: str = "write") -> Iterator[None]:
    """Translate an ``OSError`` on OUT into ``OutputError`` naming ``path`` and the cause."""
    try:
        yield
    except OSError as exc:
        raise OutputError(str(path), exc.strerror or str(exc), action=action) from exc


TMP_DIR = ".ocrflow/tmp"


_TEMP_TRIES = 100


def create_temp(folder: str | Path, *, prefix: str = "", suffix: str = "") -> tuple[int, str]:
    """A new, empty file in ``folder`` opened for writing: ``(fd, path)``.

    Unlike ``tempfile.mkstemp`` (always 0600), the file is created with mode 0666, which the
    kernel narrows by the process umask (and a folder's default ACL), exactly as for any file
    a program writes: outputs renamed into place from it are readable by whoever the umask
    lets read them (a web server, a container under another uid). No umask is read or set.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_TEMP_TRIES):
        path = os.path.join(folder, f"{prefix}{secrets.token_hex(8)}{suffix}")
        try:
            return os.open(path, flags, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name in {folder}")


_STALE_TMP_S = 3600.0


def _sweep_stale(folder: Path) -> None:
    """Remove temp files of writes killed long ago (fresh ones may belong to live workers)."""
    cutoff = time.time() - _STALE_TMP_S
    for leftover in folder.iterdir():
        with contextlib.suppress(OSError):
            if leftover.stat().st_mtime < cutoff:
                leftover.unlink()


def _remove(path: str | Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _version(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@contextlib.contextmanager
def _locked(path: Path, wait_s: float) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path``; yields ``False`` (holding nothing) if another
    process kept it for ``wait_s``."""
    with open(path, "a+b") as handle:
        deadline, pause = time.monotonic() + wait_s, 0.001
        while not _try_lock(handle.fileno()):
            if time.monotonic() >= deadline:
                yield False
                return
            time.sleep(pause)
            pause = min(2 * pause, 0.05)
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
