"""Recognising a dataset input (Parquet files, or a ``save_to_disk`` folder) and listing its
shards. Only fsspec: ``ocrflow run`` asks of every input whether it is a dataset, and that
must work without pyarrow (the ``parquet`` extra), which only reading the rows needs
(``inputs/dataset.py``)."""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from typing import Literal

import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from ocrflow.config.access import AccessPolicy
from ocrflow.errors import SourceError

DatasetFormat = Literal["parquet", "arrow"]


_SIDECARS = (".json", ".md", ".txt", ".gitattributes", ".lock", ".crc")


@dataclass(frozen=True, slots=True)
class DatasetFiles:
    """The shard files of a dataset input, in order, and the policy its rows are read
    under (what files a row may name)."""

    fs: AbstractFileSystem
    root: str
    format: DatasetFormat
    paths: list[str]
    access: AccessPolicy = field(default_factory=AccessPolicy)


# -- recognising -------------------------------------------------------------------------
def _fs(location: str, access: AccessPolicy) -> tuple[AbstractFileSystem, str]:
    fs, path = fsspec.core.url_to_fs(location, **access.storage_options(location))
    return fs, path


def is_dataset_input(location: str, access: AccessPolicy | None = None) -> bool:
    """A ``.parquet`` file or glob, a folder of Parquet files, or a ``save_to_disk`` folder."""
    from ocrflow.storage.fsspec_store import backend_errors

    # ImportError: no backend; a client's error (no credentials, no endpoint): expanding the
    # input as files says so
    errors: tuple[type[BaseException], ...] = (OSError, ValueError, ImportError, *backend_errors())
    try:
        return _find_files(location, access or AccessPolicy()) is not None
    except errors:
        return False


def _find_files(location: str, access: AccessPolicy) -> DatasetFiles | None:
    fs, path = _fs(location, access)
    if any(ch in path for ch in "*?["):
        matches = sorted(p for p in fs.glob(path) if p.endswith(".parquet"))
        root = posixpath.dirname(path)
        return DatasetFiles(fs, root, "parquet", matches, access) if matches else None
    if path.endswith(".parquet") and fs.isfile(path):
        return DatasetFiles(fs, posixpath.dirname(path), "parquet", [path], access)
    if not fs.isdir(path):
        return None
    if fs.isfile(posixpath.join(path, "state.json")) and fs.isfile(
        posixpath.join(path, "dataset_info.json")
    ):
        return _saved_dataset(fs, path, access)
    files = [p for p in fs.find(path) if not posixpath.basename(p).startswith(".")]
    parquet = sorted(p for p in files if p.endswith(".parquet"))
    others = [p for p in files if not p.endswith((".parquet", *_SIDECARS))]
    return DatasetFiles(fs, path, "parquet", parquet, access) if parquet and not others else None


def _saved_dataset(fs: AbstractFileSystem, path: str, access: AccessPolicy) -> DatasetFiles:
    with fs.open(posixpath.join(path, "state.json"), "rb") as handle:
        state = json.load(handle)
    names = [entry["filename"] for entry in state.get("_data_files", [])]
    return DatasetFiles(fs, path, "arrow", [posixpath.join(path, n) for n in names], access)


def dataset_files(location: str, access: AccessPolicy | None = None) -> DatasetFiles:
    """The dataset's shard files; ``SourceError`` when ``location`` is not a dataset, or
    when a restricted ``access`` does not allow one of its shards (a link out)."""
    found = _find_files(location, access or AccessPolicy())
    if found is None or not found.paths:
        raise SourceError(f"{location}: not a Parquet dataset or a save_to_disk folder")
    if found.access.restricted:
        for path in found.paths:
            if is_local(found):
                found.access.check_local_file(path, capped=False)
            else:
                found.access.check_uri(found.fs.unstrip_protocol(path))
    return found


def is_local(files: DatasetFiles) -> bool:
    """Whether the dataset's shards are local files."""
    return isinstance(files.fs, LocalFileSystem)
