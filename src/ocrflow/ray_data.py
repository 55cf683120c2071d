"""Ray Data: ``DocumentConverter``, a callable class for ``Dataset.map_batches``.

::

    ds = ray.data.read_binary_files("scans/", include_paths=True)
    converted = ds.map_batches(
        DocumentConverter, fn_constructor_kwargs={"root": "scans/"}, concurrency=4
    )

Input rows: those of ``read_binary_files(..., include_paths=True)`` (``bytes``, ``path``), or
of a Parquet dataset whose ``dataset_column`` holds each document (raw bytes, or an image
struct's ``bytes``; a struct naming only a file path is not read). Output rows: ``id``,
``path``, ``status``, ``reason``, ``markdown``, ``pages`` (the whole ``Document`` as JSON:
``Document.from_dict(json.loads(row["pages"]))``) and ``n_pages`` (the document's page
count). A document that cannot be converted is a row with status ``failed`` and a reason,
never a failed task; only an engine that keeps failing (or cannot be set up) fails it.

Each actor opens one engine session and one render pool for its lifetime and runs every
document of its batches through ``ocrflow run``'s document pipeline; the options are
``ocrflow run``'s (``ocrflow.config.builder``), ``engine`` included, so any engine works.
Nothing is written anywhere but a scratch folder of the actor (page checkpoints, removed as
each document finishes): figure links in the Markdown name files that are not kept.

Ids are ``ocrflow run``'s: the document's content hash, the configuration fingerprint and
its name relative to the input (``root``: the folder ``ocrflow run`` would be given; without
it the file's name; a dataset row's ``dataset_id_column`` value when that option is given).
Ray is not imported here: Ray Data instantiates the class in its actors.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import json
import os
import posixpath
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa
from pydantic import ValidationError

from ocrflow.config import RunConfig
from ocrflow.config.builder import UnknownOption, build_run_config
from ocrflow.document import Document, document_from_result
from ocrflow.errors import ConfigError, EngineFailing, EngineSetupError
from ocrflow.executors.pipeline_setup import build_pipeline, build_reader
from ocrflow.executors.preflight import check_before_start
from ocrflow.inputs.source import SNIFF_BYTES, Source, sniff_kind
from ocrflow.pipeline.documents import (
    DocumentJob,
    DocumentPipeline,
    assemble_document,
    document_id,
)
from ocrflow.readers.session import EngineSession, open_engine
from ocrflow.render.pool import RenderPool
from ocrflow.sinks.base import DocumentMeta, figure_markdown
from ocrflow.storage.names import safe_relpath
from ocrflow.storage.open import open_store
from ocrflow.types import DocStatus, DocumentResult
from ocrflow.workspace.state import Workspace, store_call

__all__ = ["OUTPUT_SCHEMA", "DocumentConverter"]

#: The columns of the rows ``DocumentConverter`` returns.
OUTPUT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("path", pa.string()),
        ("status", pa.string()),
        ("reason", pa.string()),
        ("markdown", pa.string()),
        ("pages", pa.string()),
        ("n_pages", pa.int64()),
    ]
)

#: ``ocrflow run`` options about OUT or the batch, which rows of a dataset have none of.
_NOT_HERE = frozenset(
    {"output_format", "split_pages", "lease_ttl", "stages", "describe_model", "describe_server"}
)


@dataclass(frozen=True, slots=True)
class _Row:
    """One input row: the document's bytes, where it came from, and its job."""

    path: str
    job: DocumentJob
    data: bytes


class DocumentConverter:
    """Converts batches of documents with one engine session and one render pool.

    ``root``: the folder (or URL prefix) the rows' paths are named relative to, as
    ``ocrflow run ROOT`` names them; ``path_column``: the column naming each row's source.
    Other keyword arguments are the options of ``ocrflow run`` (``engine``, ``server``,
    ``model``, ``pages``, ``workers``, ``dataset_column`` — the document column, default
    ``bytes`` —, ``dataset_id_column``, …). ``UnknownOption``/``ConfigError`` for options.
    """

    def __init__(self, *, root: str | None = None, path_column: str = "path", **options: Any):
        for name in sorted(_NOT_HERE & set(options)):
            raise UnknownOption(f"DocumentConverter takes no option {name!r}: rows have no OUT")
        self.column = options.get("dataset_column") or "bytes"
        self.id_column: str | None = options.get("dataset_id_column")
        self.path_column = path_column
        self.roots = _spellings(root) if root else set()
        self._scratch = tempfile.mkdtemp(prefix="ocrflow-ray-data-")
        try:
            config = _config(self._scratch, options)
            check_before_start(config)
            self.fingerprint = config.fingerprint()
            self._session: _Session | None = _Session(config, self._scratch)
        except BaseException:
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise

    def __call__(self, batch: Mapping[str, Any]) -> pa.Table:
        """Convert a batch (a dict of columns, or a pandas DataFrame); one row a document."""
        if self._session is None:
            raise RuntimeError("DocumentConverter is closed")
        rows = [self._row(values) for values in _records(batch, self._columns(batch))]
        documents = self._session.convert(rows)
        return pa.Table.from_pylist(
            [_output(row, doc) for row, doc in zip(rows, documents, strict=True)],
            schema=OUTPUT_SCHEMA,
        )

    def close(self) -> None:
        """Close the engine, stop the render workers and remove the scratch folder."""
        session, self._session = getattr(self, "_session", None), None
        if session is not None:
            session.close()
        if getattr(self, "_scratch", None):
            shutil.rmtree(self._scratch, ignore_errors=True)

    def __del__(self) -> None:
        self.close()

    def _columns(self, batch: Mapping[str, Any]) -> list[str]:
        names = list(batch.keys())
        if self.column not in names:
            raise ConfigError(
                f"no column {self.column!r} in the rows (columns: {', '.join(names)}): "
                "pass dataset_column='<the column holding each document>'"
            )
        wanted = [self.column, self.path_column, self.id_column]
        return [name for name in dict.fromkeys(wanted) if name and name in names]

    def _row(self, values: Mapping[str, Any]) -> _Row:
        data = _document_bytes(values.get(self.column))
        path = str(values.get(self.path_column) or "")
        digest = hashlib.sha256(data).hexdigest()
        rel = self._rel(path, values.get(self.id_column) if self.id_column else None, digest)
        doc_id = document_id(digest, self.fingerprint, rel)
        kind = sniff_kind(data[:SNIFF_BYTES]) if data else "empty"
        source = Source(path or rel, rel, kind, len(data))
        return _Row(path, DocumentJob(source, rel, doc_id, digest), data)

    def _rel(self, path: str, row_id: Any, digest: str) -> str:
        """The document's name relative to its input, as ``ocrflow run`` gives it."""
        if row_id is not None:
            return safe_relpath(str(row_id))
        if not path:
            return digest[:24]
        for spelling in _spellings(path):
            for root in self.roots:
                if spelling.startswith(root + "/"):
                    return safe_relpath(spelling[len(root) + 1 :])
        return safe_relpath(posixpath.basename(path.rstrip("/")))


class _Session:
    """The engine session, render pool and document pipeline of one actor, held by a task
    on an event loop of its own thread (they must live on one loop, and Ray Data calls the
    converter from whichever thread it likes)."""

    def __init__(self, config: RunConfig, scratch: str) -> None:
        self.config = config
        self.fingerprint = config.fingerprint()
        self.workspace = Workspace(open_store(os.path.join(scratch, "work")))
        self.files = os.path.join(scratch, "files")
        os.makedirs(self.files, exist_ok=True)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="ocrflow-ray-data", daemon=True
        )
        self._thread.start()
        self._stop = asyncio.Event()
        ready: concurrent.futures.Future[DocumentPipeline] = concurrent.futures.Future()
        self._held = asyncio.run_coroutine_threadsafe(self._hold(ready), self._loop)
        try:
            self.pipeline = ready.result()
        except BaseException:
            self._end_loop()
            raise

    async def _hold(self, ready: concurrent.futures.Future[DocumentPipeline]) -> None:
        render = self.config.render
        pool = RenderPool(
            render.workers, page_timeout_s=render.page_timeout_s, memory_mb=render.worker_memory_mb
        )
        try:
            async with open_engine(self.config.engine, log_dir=None) as session:
                ready.set_result(self._pipeline(session, pool))
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise
        finally:
            pool.close()

    def _pipeline(self, session: EngineSession, pool: RenderPool) -> DocumentPipeline:
        reader = build_reader(self.config, session, self.workspace)
        return build_pipeline(
            self.config,
            self.workspace,
            session,
            reader,
            pool=pool,
            listeners=[_Unheard()],
            owner="ray-data",
            fingerprint=self.fingerprint,
        )

    def convert(self, rows: list[_Row]) -> list[Document]:
        """The documents of ``rows``, converted concurrently (pages bounded by the budget)."""
        return asyncio.run_coroutine_threadsafe(self._convert_all(rows), self._loop).result()

    async def _convert_all(self, rows: list[_Row]) -> list[Document]:
        tasks = [asyncio.ensure_future(self._convert(row)) for row in rows]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:  # the engine failed the batch: stop its other documents
            for task in tasks:
                task.cancel()
            raise

    async def _convert(self, row: _Row) -> Document:
        job = row.job
        try:
            result = await self._converted(row)
        except (EngineFailing, EngineSetupError):
            raise  # the engine, not the document: the task fails and Ray Data retries it
        except Exception as exc:  # a bad document is a row with a status, never a failed task
            reason = str(getattr(exc, "reason", "") or "error")
            result = DocumentResult(
                job.doc_id, job.source.uri, DocStatus.FAILED, reason=reason, message=str(exc)
            )
        meta = DocumentMeta(
            job.rel, job.content_sha256, None, self.pipeline.engine_name, self.fingerprint
        )
        return document_from_result(
            result, meta, figure_markdown=partial(figure_markdown, job.doc_id)
        )

    async def _converted(self, row: _Row) -> DocumentResult:
        """``ocrflow run``'s steps for one document (``ItemLoop._process_document``), with the
        assembled result kept instead of written to sinks."""
        with _scratch_file(self.files, row.data) as path:
            job = dataclasses.replace(row.job, path=path)
            opened = await self.pipeline.open(job)
            if isinstance(opened, DocumentResult):
                return opened
            try:
                pages = await self.pipeline.convert_pages(job, opened.pages, opened.password)
            finally:
                await store_call(self.workspace.clear_pages, job.doc_id)
        return assemble_document(
            job.doc_id,
            job.source.uri,
            pages,
            opened.page_count,
            max_fallback_rate=self.pipeline.max_page_error_rate,
        )

    def close(self) -> None:
        """Close the engine and the render pool, then end the loop."""
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._stop.set)
        with contextlib.suppress(Exception):
            self._held.result(timeout=60)
        self._end_loop()

    def _end_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()


class _Unheard:
    """Progress nobody listens to (Ray Data reports progress by rows)."""

    def document_started(self, source: object, pages: int) -> None:
        """Nothing to report."""

    def pages_finished(self, results: object) -> None:
        """Nothing to report."""

    def document_finished(self, source: object, result: object, skipped: bool) -> None:
        """Nothing to report."""


@contextlib.contextmanager
def _scratch_file(folder: str, data: bytes) -> Any:
    """A file holding ``data`` (render workers open documents by path), removed after."""
    handle, path = tempfile.mkstemp(dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _config(scratch: str, options: dict[str, Any]) -> RunConfig:
    try:
        return build_run_config((), os.path.join(scratch, "out"), **options)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"invalid option ({where}): {first['msg']}") from None


def _records(batch: Mapping[str, Any], columns: list[str]) -> list[dict[str, Any]]:
    """The batch's rows, as dicts of the ``columns`` wanted (numpy, pandas or lists)."""
    values = {name: list(batch[name]) for name in columns}
    count = len(values[columns[0]])
    return [{name: values[name][i] for name in columns} for i in range(count)]


def _document_bytes(value: Any) -> bytes:
    """A cell's document: raw bytes, or an image struct's ``bytes`` (else none)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, Mapping) and isinstance(value.get("bytes"), bytes | bytearray):
        return bytes(value["bytes"])
    return b""


def _output(row: _Row, doc: Document) -> dict[str, Any]:
    return {
        "id": doc.id,
        "path": row.path,
        "status": str(doc.status),
        "reason": doc.reason,
        "markdown": doc.markdown,
        "pages": json.dumps(doc.to_dict(), ensure_ascii=False),
        "n_pages": doc.page_count,
    }


def _spellings(path: str) -> set[str]:
    """How Ray Data may name ``path``: without its ``scheme://`` (``s3://b/k`` is ``b/k``),
    and, when it may be local, absolute."""
    bare = path.partition("://")[2] if "://" in path else path
    local = "://" not in path or path.startswith("file://")
    return {bare.rstrip("/")} | ({os.path.abspath(bare).rstrip("/")} if local else set())
