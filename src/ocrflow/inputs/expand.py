"""Expand inputs (files, directories, globs, ``@list.txt``, fsspec URLs) into sources.

A source's kind is recognised by its first bytes, not by its name.
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ocrflow.config.access import AccessPolicy, AccessRefused, is_url
from ocrflow.errors import SourceError, require
from ocrflow.inputs.globs import glob_root, glob_without_links
from ocrflow.inputs.skips import Skipped, SkipReason
from ocrflow.inputs.source import DOCUMENT_SUFFIXES, SNIFF_BYTES, Source, sniff_kind
from ocrflow.storage.names import escape_bytes, local_path, local_uri, shown
from ocrflow.types import Reason

if TYPE_CHECKING:
    from ocrflow.config import InputOptions


#: Kinds of sources known to fail before a byte of them is read (refused when the inputs
#: were expanded, or when a worker came to read them): the kind is the failure's reason.
_REFUSALS = {
    Reason.PATH_NOT_ALLOWED.value: "the input names a file this run may not read",
    Reason.TOO_LARGE.value: "the file is larger than this run reads",
    Reason.UNREADABLE.value: "the file could not be read (gone, a broken link, no permission)",
    Reason.NOT_A_FILE.value: "not a regular file (a device, FIFO or socket): never read",
}


#: What marks a folder as ocrflow's own output, never walked as input: an OUT's workspace
#: (``workspace.WORKSPACE_DIR``) or a review site's marker (``review.site.MARKER``).
OCRFLOW_MARKERS = (".ocrflow", ".ocrflow-review")


@dataclass(frozen=True)
class _Expansion:
    """What expanding one run's inputs carries along: its access policy, and the skips."""

    access: AccessPolicy
    skipped: Skipped


def expand_inputs(
    inputs: Iterable[str],
    *,
    exclude: Iterable[str] = (),
    options: InputOptions | None = None,
    limit: int | None = None,
    skipped: Skipped | None = None,
) -> list[Source]:
    """All sources the inputs name, in a stable order, without duplicates.

    Files named explicitly are always kept (an unrecognised one, or one that is not a
    regular file, fails later with a reason); files found by walking a directory or glob
    are kept when their content or suffix says they are documents, and the others are
    counted in ``skipped`` by reason (``SkipReason``). Paths under ``exclude`` (the output
    directory) and folders that are ocrflow outputs are skipped. A dataset input (Parquet,
    ``save_to_disk`` folder) yields one source a row (``options`` picks its columns); only
    ids and sizes are kept, never the rows' bytes. ``limit``: stop once that many sources
    are found (a caller with a cap asks for one more than it allows).
    """
    excluded = tuple(os.path.realpath(e) for e in exclude if "://" not in e)
    access = options.access if options is not None else AccessPolicy()
    ctx = _Expansion(access, skipped if skipped is not None else Skipped())
    seen: set[str] = set()
    sources: list[Source] = []
    for item in inputs:
        for source in _expand_input(item, options, ctx):
            key = source.uri
            if key in seen:
                continue
            if _is_under(local_path(key), excluded):
                ctx.skipped.add(SkipReason.IN_OUTPUT, key)
                continue
            seen.add(key)
            sources.append(source)
            if limit is not None and len(sources) >= limit:
                return sources  # the rest of an endless input is never read
    return sources


def refusal(kind: str) -> tuple[str, str] | None:
    """``(reason, message)`` for a source known to fail unread (its ``kind`` is the
    reason), else ``None``."""
    message = _REFUSALS.get(kind)
    return (kind, message) if message else None


def _expand_input(item: str, options: InputOptions | None, ctx: _Expansion) -> Iterator[Source]:
    from ocrflow.inputs.dataset_files import is_dataset_input

    access = ctx.access
    if access.restricted and not item.startswith("@"):
        item = access.check_uri(item)  # again when planning: a link may have changed since
    if not item.startswith("@") and is_dataset_input(item, access):
        require("pyarrow", extra="parquet", feature=f"the dataset input {shown(item)}")
        from ocrflow.inputs.dataset import iter_row_sources

        column = options.dataset_column if options else None
        id_column = options.dataset_id_column if options else None
        yield from iter_row_sources(item, column=column, id_column=id_column, access=access)
    else:
        yield from _expand_one(item, ctx)


def _expand_one(item: str, ctx: _Expansion) -> Iterator[Source]:
    if item.startswith("@"):
        if ctx.access.restricted:
            raise AccessRefused("list files (@FILE) are not read under this access policy")
        yield from _expand_list_file(item[1:], ctx)
    elif is_url(item):
        from ocrflow.inputs.remote import expand_remote

        yield from expand_remote(item, access=ctx.access)
    else:
        yield from _expand_local(item.removeprefix("file://"), ctx)


def _expand_list_file(path: str, ctx: _Expansion) -> Iterator[Source]:
    try:
        # Bytes: a listed name may be in any encoding, as file names are.
        lines = [os.fsdecode(line) for line in Path(path).read_bytes().splitlines()]
    except OSError as exc:
        raise SourceError(f"cannot read list file {shown(path)}: {exc.strerror}") from exc
    for line in lines:
        line = line.strip()
        if line and not line.startswith("#"):
            yield from _expand_one(line, ctx)


def _expand_local(item: str, ctx: _Expansion) -> Iterator[Source]:
    path = Path(item)
    if path.is_dir():
        yield from _walk(path, ctx)
    elif path.exists() or path.is_symlink():
        # Named explicitly: kept whatever it holds (a FIFO, a device or a broken link fails
        # unread, with its reason); a restricted run reads only a regular file under an
        # allowed folder (else the whole input is refused).
        real = ctx.access.check_local_file(item) if ctx.access.restricted else item
        yield _local_source(Path(real), path.name)
    elif glob.has_magic(item):
        yield from _expand_glob(item, ctx)
    else:
        raise SourceError(f"no such file or directory: {shown(item)}")


def _expand_glob(pattern: str, ctx: _Expansion) -> Iterator[Source]:
    if ctx.access.restricted:
        matches = glob_without_links(pattern)
    else:
        matches = sorted(glob.glob(pattern, recursive=True))
    if not matches:
        raise SourceError(f"no file matches {shown(pattern)}")
    root = Path(glob_root(pattern))
    for match in matches:
        m = Path(match)
        if _in_ocrflow_folder(m, root):
            ctx.skipped.add(SkipReason.OCRFLOW_OUTPUT, match)
        elif not m.is_dir():
            yield from _found_file(m, root, ctx)
        elif ctx.access.local_real_path(match) is not None:  # a linked folder out: not walked
            yield from _walk(m, ctx)
        else:
            ctx.skipped.add(SkipReason.PATH_NOT_ALLOWED, match)


def _walk(root: Path, ctx: _Expansion) -> Iterator[Source]:
    if ctx.access.local_real_path(str(root)) is None:
        raise AccessRefused(f"{shown(str(root))} is outside the allowed prefixes")
    for dirpath, dirnames, filenames in os.walk(root):  # links to folders are not followed
        folder = Path(dirpath)
        if _is_ocrflow_folder(folder):  # another run's OUT or review site: its own files
            ctx.skipped.add(SkipReason.OCRFLOW_OUTPUT, dirpath)
            dirnames[:] = []
            continue
        dirnames[:] = [d for d in sorted(dirnames) if _walked_into(folder / d, ctx)]
        for name in sorted(filenames):
            if name.startswith("."):
                ctx.skipped.add(SkipReason.HIDDEN, os.path.join(dirpath, name))
            else:
                yield from _found_file(folder / name, root, ctx)


def _walked_into(folder: Path, ctx: _Expansion) -> bool:
    """Whether a walk goes into ``folder``: not when hidden or a link (counted as skips)."""
    if folder.name.startswith("."):
        ctx.skipped.add(SkipReason.HIDDEN, str(folder))
        return False
    if folder.is_symlink():
        ctx.skipped.add(SkipReason.LINK_TO_FOLDER, str(folder))
        return False
    return True


def _found_file(path: Path, root: Path, ctx: _Expansion) -> Iterator[Source]:
    """A file a walk or glob found, kept when it looks like a document, else counted as a
    skip with its reason. Restricted: only when its real path lies under an allowed
    folder; a link out is recorded as refused (when named like a document), and nothing
    of its target is looked at."""
    if ctx.access.local_real_path(str(path)) is None:
        if path.suffix.lower() in DOCUMENT_SUFFIXES:
            rel = escape_bytes(PurePosixPath(os.path.relpath(path, root)).as_posix())
            yield Source(local_uri(os.path.abspath(path)), rel, Reason.PATH_NOT_ALLOWED.value, 0)
        else:
            ctx.skipped.add(SkipReason.PATH_NOT_ALLOWED, str(path))
        return
    reason = _skip_reason(path)
    if reason is not None:
        ctx.skipped.add(reason, str(path))
    else:
        yield _local_source(path, _rel_posix(path, root))


def _skip_reason(path: Path) -> SkipReason | None:
    """Why a walk leaves ``path`` out, or ``None`` when it is kept as a document."""
    try:
        mode = os.stat(path).st_mode  # through a link: a link to a document is kept
    except OSError:
        return SkipReason.BROKEN_LINK if path.is_symlink() else SkipReason.UNREADABLE
    if stat.S_ISDIR(mode):
        return SkipReason.LINK_TO_FOLDER
    if not stat.S_ISREG(mode):
        return SkipReason.NOT_A_FILE
    if path.suffix.lower() == ".parquet":
        return SkipReason.DATASET
    return None if _looks_like_document(path) else SkipReason.NOT_A_DOCUMENT


def _is_ocrflow_folder(folder: Path) -> bool:
    return any(os.path.lexists(folder / marker) for marker in OCRFLOW_MARKERS)


def _in_ocrflow_folder(path: Path, root: Path) -> bool:
    """Whether a glob's match lies in an ocrflow OUT or review site below the glob's root."""
    for folder in path.parents:
        if _is_ocrflow_folder(folder):
            return True
        if folder == root or folder == folder.parent:
            return False
    return False


def _looks_like_document(path: Path) -> bool:
    return path.suffix.lower() in DOCUMENT_SUFFIXES or sniff_kind(_head(path)) in {"pdf", "image"}


def _local_source(path: Path, rel: str) -> Source:
    """A local file as a source; anything but a regular file (a FIFO, a device, a broken
    link) is never read: its kind says why it fails (``not_a_file``, ``unreadable``)."""
    uri, rel = local_uri(os.path.realpath(path)), escape_bytes(rel)
    try:
        info = os.stat(path)
    except OSError:
        return Source(uri, rel, Reason.UNREADABLE.value, 0)
    if not stat.S_ISREG(info.st_mode):
        return Source(uri, rel, Reason.NOT_A_FILE.value, 0)
    return Source(uri=uri, rel=rel, kind=sniff_kind(_head(path)), size=info.st_size)


def _head(path: Path) -> bytes:
    """The first KiB of a regular file; ``b""`` for anything else (a FIFO blocks, a device
    may never end) or when it cannot be read."""
    try:
        if not path.is_file():
            return b""
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            return handle.read(SNIFF_BYTES) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""


def _rel_posix(path: Path, root: Path) -> str:
    try:
        return PurePosixPath(path.resolve().relative_to(root.resolve())).as_posix()
    except (ValueError, RuntimeError, OSError):  # a link out of the root, or a loop
        return path.name


def _is_under(uri: str, roots: tuple[str, ...]) -> bool:
    return any(uri == r or uri.startswith(r + os.sep) for r in roots)
