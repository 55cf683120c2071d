"""A worker's local copies of its documents: a local file as it is, a remote one copied
(``inputs/remote.py``), a dataset row written to a temporary file (``inputs/dataset_rows.py``).

Every worker builds a ``RowFetcher``; only a dataset input needs pyarrow (the ``parquet``
extra), so the modules that read rows are imported at the first row.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ocrflow.config.access import AccessPolicy
from ocrflow.errors import require
from ocrflow.inputs.source import RowRef, parse_row_uri

if TYPE_CHECKING:
    from ocrflow.inputs.dataset_rows import RowCursor

#: Prefix of the temporary file a row is written to (the renderer's input).
ROW_COPY_PREFIX = ".ocrflow-row-"


class RowFetcher:
    """A worker's local copies of its documents: a dataset row is written to a temporary
    file from a ``RowCursor`` (one per dataset, kept across documents); anything else goes
    to ``remote.local_copy``. Thread-safe (documents are fetched from worker threads)."""

    def __init__(self, column: str | None = None, access: AccessPolicy | None = None) -> None:
        self.column = column
        #: Checked again at each read: a link may have changed since the run was planned.
        self.access = access or AccessPolicy()
        self._cursors: dict[str, RowCursor] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def local_copy(self, uri: str) -> Iterator[str]:
        """A local path holding ``uri``'s bytes, removed on exit when it is a copy."""
        ref = parse_row_uri(uri)
        if ref is None:
            from ocrflow.inputs.remote import local_copy

            with local_copy(uri, access=self.access) as path:
                yield path
            return
        data = self.fetch(ref)
        fd, tmp = tempfile.mkstemp(prefix=ROW_COPY_PREFIX)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            del data
            yield tmp
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def fetch(self, ref: RowRef) -> bytes:
        """The bytes of the row ``ref`` names; ``SourceError`` when it cannot be read."""
        require("pyarrow", extra="parquet", feature="a dataset input")
        from ocrflow.inputs.dataset_rows import fetch_row

        with self._lock:
            return fetch_row(self._cursors, ref, self.column, self.access)
