"""Stage 3, assemble: write each document with figures again, its figures described.

Reads only the workspace: the ``FigureDocument`` extract recorded (pages with figure
placeholders) and the answers of the last describe run (``describe/latest.json``). Each
figure's description becomes its link's alt text and a paragraph (or a table) right after
the link; the same sinks as extract rewrite every format that holds figures (Markdown, JSONL,
json, chunks, docling: ``sinks.figure_formats``), and Parquet rows of these documents are
rebuilt in place, one shard at a time (each shard written atomically). The layout formats
(pdf, hocr, alto) hold printed words only: a description changes nothing there.
Nothing is sent to a model; running it again gives the same files.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ocrflow.sinks import Outputs, figure_formats
from ocrflow.sinks.base import FinishedDocument
from ocrflow.sinks.figure_records import figure_doc_ids, finished_document, load_figure_document
from ocrflow.stages.figure_items import load_latest, load_results
from ocrflow.workspace.state import Workspace


@dataclass
class AssembleStats:
    """What one assemble run wrote."""

    documents: int = 0
    figures: int = 0
    described: int = 0
    parquet_rows: int = 0
    parquet_shards: int = 0
    elapsed_s: float = 0.0

    def record(self) -> dict[str, object]:
        return dict(self.__dict__)


def assemble(workspace: Workspace) -> AssembleStats:
    """Rewrite the outputs of every finished document with figures; return counts."""
    started = time.monotonic()
    store = workspace.store
    config = workspace.recorded_run_config()
    stats = AssembleStats()
    load = _loader(workspace)
    rewritten = figure_formats(config.out.formats)
    outputs = (
        Outputs(
            config.out.model_copy(update={"formats": rewritten}), store, "assemble", figures=False
        )
        if rewritten
        else None
    )
    done = workspace.done_ids()
    doc_ids = [d for d in figure_doc_ids(store) if d in done]
    for doc_id in doc_ids:
        document = load(doc_id)
        if document is None:
            continue
        if outputs is not None:
            outputs.write(document)
        figures = [f for p in document.result.pages for f in p.figures]
        stats.documents += 1
        stats.figures += len(figures)
        stats.described += sum(1 for f in figures if f.description)
    if outputs is not None:
        outputs.close()
    if "parquet" in config.out.formats:
        from ocrflow.sinks.parquet import rewrite_parquet  # pyarrow: the parquet extra

        stats.parquet_shards, stats.parquet_rows = rewrite_parquet(store, set(doc_ids), load)
    stats.elapsed_s = round(time.monotonic() - started, 3)
    return stats


def _loader(workspace: Workspace) -> Callable[[str], FinishedDocument | None]:
    """A function giving a document with the descriptions of the last describe run."""
    store = workspace.store
    latest = load_latest(store)
    set_id = latest.fingerprint if latest else None

    def load(doc_id: str) -> FinishedDocument | None:
        record = load_figure_document(store, doc_id)
        if record is None:
            return None
        results = load_results(store, set_id, doc_id) if set_id else {}
        descriptions = {k: r.markdown for k, r in results.items() if r.status == "ok"}
        return finished_document(record, {k: v for k, v in descriptions.items() if v})

    return load
