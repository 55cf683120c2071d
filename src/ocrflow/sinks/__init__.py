"""Outputs as plug-ins: each format is a ``Sink`` (``write(document)``, ``close()``).

The configured sinks own every output byte. Adding a format is one module with a sink class
and one line in ``_FACTORIES``. ``Outputs`` drives the configured list as one and tells the
pipeline which documents are durable in every format, so their done markers may be written:
at once for sinks that write each document whole, after the shard is on disk for a buffering
sink (Parquet, see ``sinks.parquet``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ocrflow.config import OutputOptions
from ocrflow.config.environment import PARQUET_ROWS_VARIABLE, setting
from ocrflow.document.furniture import without_furniture
from ocrflow.errors import ConfigError, require
from ocrflow.sinks.base import (
    BufferedSink,
    DocumentMeta,
    FinishedDocument,
    OriginalFile,
    Sink,
    figure_key,
    figure_link,
    page_text,
)
from ocrflow.sinks.figures import FigureSink
from ocrflow.sinks.jsonl import JsonlSink, assemble_text, dolma_record, jsonl_line, results_key
from ocrflow.sinks.markdown import PAGE_JOINER, MarkdownSink, markdown_key, render_markdown
from ocrflow.storage.local import Store
from ocrflow.storage.names import safe_relpath

__all__ = [
    "KNOWN_FORMATS",
    "PAGE_JOINER",
    "BufferedSink",
    "DocumentMeta",
    "FigureSink",
    "FinishedDocument",
    "JsonlSink",
    "MarkdownSink",
    "OriginalFile",
    "OutputFormat",
    "Outputs",
    "Sink",
    "SinkContext",
    "assemble_text",
    "build_sinks",
    "dolma_record",
    "figure_formats",
    "figure_key",
    "figure_link",
    "format_sink",
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
    #: ``--chunk-tokens``: the most tokens a RAG chunk holds (``chunks``).
    chunk_tokens: int = 512
    #: ``--pdfa``: searchable PDFs as PDF/A-2b (``pdf``).
    pdfa: bool = False
    #: ``--rotate-pages``: OCR'd pages the engine turned are shown upright (``pdf``).
    rotate_pages: bool = False
    #: ``--deskew``: OCR'd pages the engine found askew are shown straightened (``pdf``).
    deskew: bool = False


# The layout formats import their libraries (pypdfium2, lxml, docling-core, pyarrow) only when
# chosen: a run that writes Markdown and JSONL needs none of the optional extras.


def _json(context: SinkContext) -> Sink:
    from ocrflow.sinks.json_document import JsonSink

    return JsonSink(context.store)


def _pdf(context: SinkContext) -> Sink:
    from ocrflow.sinks.searchable_pdf import PdfOptions, PdfSink

    options = PdfOptions(context.pdfa, context.rotate_pages, context.deskew)
    return PdfSink(context.store, options)


def _txt(context: SinkContext) -> Sink:
    from ocrflow.sinks.sidecar_text import SidecarTextSink

    return SidecarTextSink(context.store)


def _hocr(context: SinkContext) -> Sink:
    from ocrflow.sinks.hocr import HocrSink

    return HocrSink(context.store)


def _alto(context: SinkContext) -> Sink:
    from ocrflow.sinks.alto import AltoSink

    return AltoSink(context.store)


def _docling(context: SinkContext) -> Sink:
    from ocrflow.sinks.docling import DoclingSink

    return DoclingSink(context.store)


def _chunks(context: SinkContext) -> Sink:
    from ocrflow.sinks.chunks import ChunksSink

    return ChunksSink(context.store, max_tokens=context.chunk_tokens)


def _parquet(context: SinkContext) -> Sink:
    from ocrflow.sinks.parquet import ParquetSink
    from ocrflow.storage.shards import ShardLimits

    rows = int(setting(PARQUET_ROWS_VARIABLE) or ShardLimits().max_rows)
    return ParquetSink(
        context.store,
        context.worker,
        limits=ShardLimits(max_rows=max(1, rows)),
        on_commit=context.on_commit,
    )


@dataclass(frozen=True, slots=True)
class OutputFormat:
    """A format's sink factory and what its files hold."""

    make: Callable[[SinkContext], Sink]
    #: Reading text (Markdown, plain text, chunks): ``--drop-headers-footers`` applies.
    reading_text: bool
    #: Figure descriptions: the assemble stage rewrites its files after describe. A
    #: buffering format (Parquet) is rewritten by the stage itself, shard by shard.
    holds_figures: bool
    #: The module the format imports and the extra that installs it: checked before a run
    #: (or a service job) starts, so a missing extra is one line, not a failed document.
    extra: tuple[str, str] | None = None


_FORMATS: Mapping[str, OutputFormat] = MappingProxyType(
    {
        "markdown": OutputFormat(
            lambda c: MarkdownSink(c.store, page_separator=c.page_separator), True, True
        ),
        "jsonl": OutputFormat(lambda c: JsonlSink(c.store), True, True),
        "parquet": OutputFormat(_parquet, True, False, ("pyarrow", "parquet")),
        "json": OutputFormat(_json, False, True),
        "pdf": OutputFormat(_pdf, False, False, ("pikepdf", "pdf")),
        "hocr": OutputFormat(_hocr, False, False),
        "alto": OutputFormat(_alto, False, False),
        "docling": OutputFormat(_docling, False, True, ("docling_core", "docling")),
        "chunks": OutputFormat(_chunks, True, True),
        # OCRmyPDF's sidecar: plain text, pages apart by form feeds (``--sidecar``).
        "txt": OutputFormat(_txt, True, False),
    }
)
KNOWN_FORMATS: tuple[str, ...] = tuple(_FORMATS)


def validate_formats(formats: Iterable[str]) -> tuple[str, ...]:
    """The formats, stripped and de-duplicated in order; ``ConfigError`` names unknown ones."""
    chosen = tuple(dict.fromkeys(f.strip().lower() for f in formats if f.strip()))
    unknown = [f for f in chosen if f not in _FORMATS]
    if unknown or not chosen:
        raise ConfigError(
            f"unknown output format {', '.join(unknown) or '(none)'}; "
            f"known formats: {', '.join(KNOWN_FORMATS)}"
        )
    return chosen


def require_format_extras(formats: Iterable[str]) -> None:
    """``MissingExtra`` for the first of ``formats`` whose extra is not installed."""
    for name in validate_formats(formats):
        needed = _FORMATS[name].extra
        if needed is not None:
            require(needed[0], extra=needed[1], feature=f"--format {name}")


def _make(name: str, context: SinkContext) -> Sink:
    require_format_extras([name])
    return _FORMATS[name].make(context)


def figure_formats(formats: Iterable[str]) -> tuple[str, ...]:
    """Those of ``formats`` whose files the assemble stage rewrites (they hold figures)."""
    return tuple(f for f in validate_formats(formats) if _FORMATS[f].holds_figures)


def format_sink(name: str, context: SinkContext) -> Sink:
    """The sink of one format (``ConfigError`` for an unknown name)."""
    (chosen,) = validate_formats([name])
    return _make(chosen, context)


def build_sinks(formats: Iterable[str], context: SinkContext) -> list[Sink]:
    """The sinks for ``formats``, figures first (text sinks link to the figure files)."""
    return [
        FigureSink(context.store),
        *(_make(f, context) for f in validate_formats(formats)),
    ]


class Outputs:
    """The configured sinks as one (``figures=False``: without the figure files, for a
    stage that rewrites the text outputs of documents whose figures are written).

    ``write``/``flush``/``close`` return the ids of documents now durable in every format
    (the caller writes their done markers). They may run in worker threads: buffering sinks
    are driven under a lock, the others write concurrently.
    """

    def __init__(
        self, options: OutputOptions, store: Store, worker: str, *, figures: bool = True
    ) -> None:
        context = SinkContext(
            store,
            worker,
            options.page_separator,
            self._on_commit,
            options.chunk_tokens,
            pdfa=options.pdfa,
            rotate_pages=options.rotate_pages,
            deskew=options.deskew,
        )
        named = [(f, _make(f, context)) for f in validate_formats(options.formats)]
        sinks: list[Sink] = [FigureSink(store)] if figures else []
        sinks += [sink for _, sink in named]
        self.direct = [s for s in sinks if not isinstance(s, BufferedSink)]
        self.buffered = [s for s in sinks if isinstance(s, BufferedSink)]
        #: Sinks handed the document without its page furniture (``--drop-headers-footers``).
        self._plain = {
            id(sink)
            for name, sink in named
            if options.drop_headers_footers and _FORMATS[name].reading_text
        }
        self._lock = threading.Lock()
        self._waiting: dict[str, int] = {}
        self._durable: list[str] = []

    def write(self, document: FinishedDocument) -> list[str]:
        """Write one document to every sink; the ids now durable (this one, or none yet)."""
        plain = self._without_furniture(document)
        for sink in self.direct:
            sink.write(plain if id(sink) in self._plain else document)
        if not self.buffered:
            return [document.doc_id]
        with self._lock:
            self._waiting[document.doc_id] = len(self.buffered)
            for sink in self.buffered:
                sink.write(plain if id(sink) in self._plain else document)
            return self._drain()

    def _without_furniture(self, document: FinishedDocument) -> FinishedDocument:
        if not self._plain:
            return document
        return dataclasses.replace(document, result=without_furniture(document.result))

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
