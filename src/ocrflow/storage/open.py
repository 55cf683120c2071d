"""``open_store(location)``: the ``Store`` for a local directory or any fsspec URL."""

from __future__ import annotations

from ocrflow.storage.local import LocalStore, Store


def open_store(location: str) -> Store:
    """A store for a local path or ``file://`` URL, or any other fsspec URL."""
    if "://" not in location or location.startswith("file://"):
        return LocalStore(location.removeprefix("file://"))
    from ocrflow.storage.fsspec_store import FsspecStore

    return FsspecStore(location)
