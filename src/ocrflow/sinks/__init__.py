"""Outputs as plug-ins: each format is a ``Sink`` (``write(document)``, ``close()``).

The configured sinks own every output byte. Adding a format is one module with a sink class
and one line in ``_FACTORIES``. ``Outputs`` drives the configured list as one and tells the
pipeline which documents are durable in every format, so their done markers may be written:
at once for sinks that write each document whole, after the shard is on disk for a buffering
sink (Parquet, see ``sinks.parquet``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ocrflow.config.environment import PARQUET_ROWS_VARIABLE, setting
from ocrflow.errors import ConfigError
from ocrflow.sinks.base import (
    BufferedSink,
    DocumentMeta,
    FinishedDocument,
    Sink,
    figure_key,
    figure_link,
    page_text,
)
from ocrflow.sinks.figures import FigureSink
from ocrflow.sinks.jsonl import JsonlSink, assemble_text, dolma_record, jsonl_line, results_key
from ocrflow.sinks.markdown import PAGE_JOINER, MarkdownSink, markdown_key, render_markdown
from ocrflow.sinks.parquet import ParquetSink
from ocrflow.storage.local import Store
from ocrflow.storage.names import safe_relpath
from ocrflow.storage.shards import ShardLimits

__all__ = [
    "KNOWN_FORMATS",
    "PAGE_JOINER",
    "BufferedSink",
    "DocumentMeta",
    "FigureSink",
    "FinishedDocument",
    "JsonlSink",
    "MarkdownSink",
    "Outputs",
    "ParquetSink",
    "Sink",
    "SinkContext",
    "assemble_text",
    "build_sinks",
    "dolma_record",
    "figure_key",
    "figure_link",
    "jsonl_line",
    "markdown_key",
    "page_text",
    "render_markdown",
    "results_key",
    "safe_relpath",
    "validate_formats",
]


@dataclass(frozen=True, slots=True)
class SinkContext:
    """What a sink factory may use."""

    store: Store
    worker: str
    page_separator: bool
    on_commit: Callable[[list[str]], None]


def _parquet(context: SinkContext) -> Sink:
    rows = int(setting(PARQUET_ROWS_VARIABLE) or ShardLimits().max_rows)
    return ParquetSink(
        context.store,
        context.worker,
        limits=ShardLimits(max_rows=max(1, rows)),
        on_commit=context.on_commit,
    )


_FACTORIES: Mapping[str, Callable[[SinkContext], Sink]] = MappingProxyType(
    {
        "markdown": lambda c: MarkdownSink(c.store, page_separator=c.page_separator),
        "jsonl": lambda c: JsonlSink(c.store),
        "parquet": _parquet,
    }
)
KNOWN_FORMATS: tuple[str, ...] = tuple(_FACTORIES)


def validate_formats(formats: Iterable[str]) -> tuple[str, ...]:
    """The formats, stripped and de-duplicated in order; ``ConfigError`` names unknown ones."""
    chosen = tuple(dict.fromkeys(f.strip().lower() for f in formats if f.strip()))
    unknown = [f for f in chosen if f not in _FACTORIES]
    if unknown or not chosen:
        raise ConfigError(
            f"unknown output format {', '.join(unknown) or '(none)'}; "
            f"known formats: {', '.join(KNOWN_FORMATS)}"
        )
    return chosen


def build_sinks(formats: Iterable[str], context: SinkContext) -> list[Sink]:
    """The sinks for ``formats``, figures first (text sinks link to the figure files)."""
    return [FigureSink(context.store), *(_FACTORIES[f](context) for f in validate_formats(formats))]


class Outputs:
    """The configured sinks as one.

    ``write``/``flush``/``close`` return the ids of documents now durable in every format
    (the caller writes their done markers). They may run in worker threads: buffering sinks
    are driven under a lock, the others write concurrently.
    """

    def __init__(
        self, formats: Iterable[str], store: Store, worker: str, *, page_separator: bool
    ) -> None:
        context = SinkContext(store, worker, page_separator, self._on_commit)
        sinks = build_sinks(formats, context)
        self.direct = [s for s in sinks if not isinstance(s, BufferedSink)]
        self.buffered = [s for s in sinks if isinstance(s, BufferedSink)]
        self._lock = threading.Lock()
        self._waiting: dict[str, int] = {}
        self._durable: list[str] = []

    def write(self, document: FinishedDocument) -> list[str]:
        """Write one document to every sink; the ids now durable (this one, or none yet)."""
        for sink in self.direct:
            sink.write(document)
        if not self.buffered:
            return [document.doc_id]
        with self._lock:
            self._waiting[document.doc_id] = len(self.buffered)
            for sink in self.buffered:
                sink.write(document)
            return self._drain()

    def flush(self) -> list[str]:
        """Make buffered rows durable now (before a worker stops or waits)."""
        with self._lock:
            for sink in self.buffered:
                sink.flush()
            return self._drain()

    def close(self) -> list[str]:
        """Flush and close every sink."""
        with self._lock:
            for sink in [*self.direct, *self.buffered]:
                sink.close()
            return self._drain()

    @property
    def pending(self) -> int:
        """Documents written but not yet durable in every format."""
        return len(self._waiting)

    def _on_commit(self, ids: list[str]) -> None:
        # Called by a buffering sink, under ``_lock``.
        for doc_id in ids:
            left = self._waiting.get(doc_id, 1) - 1
            if left > 0:
                self._waiting[doc_id] = left
            else:
                self._waiting.pop(doc_id, None)
                self._durable.append(doc_id)

    def _drain(self) -> list[str]:
        durable, self._durable = self._durable, []
        return durable
