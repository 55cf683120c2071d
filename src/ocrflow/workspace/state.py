"""Durable run state inside OUT/.ocrflow: done markers, page checkpoints, run records.

Ordering is what makes resume safe: a document's outputs are written (atomically) before its
done marker, and a page checkpoint is written before the pages it holds are counted as done.
A run killed at any instant leaves either finished documents, whose outputs are complete, or
unfinished ones, which the next run redoes from their last checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, fields, replace
from typing import Any, ParamSpec, TypeVar

from ocrflow.cancellation import run_to_end
from ocrflow.config import RunConfig
from ocrflow.document import blocks_from_rows, blocks_to_rows
from ocrflow.errors import OutputError, WorkspaceError
from ocrflow.storage.local import Store
from ocrflow.types import (
    DocumentResult,
    Figure,
    ImageSize,
    PageResult,
    PageStatus,
    Route,
)
from ocrflow.workspace.records import DoneRecord, PageSummary, RunRecord

WORKSPACE_DIR = ".ocrflow"
#: Seconds one store call (a write, a read, a listing) may keep the event loop waiting.
STORE_TIMEOUT_S = 300.0

P = ParamSpec("P")
T = TypeVar("T")


async def store_call(call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a blocking store call in a worker thread, so the event loop (and the hundreds of
    requests it holds) never waits on disk or network; wait at most ``STORE_TIMEOUT_S``.

    A thread cannot be killed: the timeout bounds the *wait*, not the call, which may finish
    later. That is safe because every store write is atomic (a temp file and a rename
    locally, one PUT on an object store): an abandoned write lands whole or not at all. A
    timeout raises ``OutputError`` (the run stops with exit 3, like any unwritable OUT).
    """
    name = getattr(call, "__qualname__", repr(call))
    try:
        return await asyncio.wait_for(asyncio.to_thread(call, *args, **kwargs), STORE_TIMEOUT_S)
    except TimeoutError as exc:
        raise OutputError(name, f"no answer within {STORE_TIMEOUT_S:.0f} s") from exc


async def store_write(call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``store_call`` for a write that a cancellation must not outrun: a cancelled caller
    first waits for the write's thread to end (``run_to_end``; ``STORE_TIMEOUT_S`` still
    bounds the wait). So whoever cleans up after cancelled work (a worker that lost its
    lease drops the page checkpoints it wrote late) sees every write that work made."""
    return await run_to_end(store_call(call, *args, **kwargs))


def page_to_dict(page: PageResult) -> dict[str, Any]:
    """A JSON-ready form of a page result; figure crops are left out (they are blobs), and
    blocks are in their compact form (``document.rows``), only when the page has some."""
    data = {f.name: getattr(page, f.name) for f in fields(page)}
    data["attributes"] = dict(page.attributes)
    if page.blocks:
        data["blocks"] = blocks_to_rows(page.blocks)
    else:
        del data["blocks"]
    data["figures"] = [
        {"page": f.page, "index": f.index, "label": f.label, "box": list(f.box)}
        for f in page.figures
    ]
    data["image_size"] = asdict(page.image_size) if page.image_size else None
    return data


def page_from_dict(
    data: Mapping[str, Any], crops: Mapping[tuple[int, int], bytes] | None = None
) -> PageResult:
    """The inverse of ``page_to_dict``; ``crops`` holds figure PNGs by (page, index).

    Checkpoints written before pages carried figures, image sizes or blocks load as pages
    without.
    """
    values = dict(data)
    values["blocks"] = blocks_from_rows(values.get("blocks"))
    values["route"] = Route(values["route"])
    values["status"] = PageStatus(values["status"])
    values["figures"] = tuple(
        Figure(
            int(f["page"]),
            int(f["index"]),
            str(f["label"]),
            tuple(float(v) for v in f["box"]),  # type: ignore[arg-type]
            (crops or {}).get((int(f["page"]), int(f["index"]))),
        )
        for f in values.get("figures") or ()
    )
    size = values.get("image_size")
    values["image_size"] = ImageSize(int(size["width"]), int(size["height"])) if size else None
    return PageResult(**values)


def figure_blob_name(page: int, index: int) -> str:
    """A checkpointed figure crop's name in the document's checkpoint folder."""
    return f"fig-p{page}-{index}.png"


def step_blob_name(page: int) -> str:
    """A page's step checkpoint's name in the document's checkpoint folder."""
    return f"steps-p{page:06d}.step"


def result_from_done(record: DoneRecord) -> DocumentResult:
    """A finished document as its done marker tells it (its pages' texts are not kept)."""
    return DocumentResult(
        record.doc_id,
        record.source,
        record.status,
        page_count=record.page_count,
        reason=record.reason,
        message=record.message,
    )


class Workspace:
    """The state of one output location, shared by every run and worker that writes to it."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _key(self, *parts: str) -> str:
        return "/".join((WORKSPACE_DIR, *parts))

    # -- configuration -------------------------------------------------------------------
    def bind(self, config: RunConfig) -> str:
        """Record the run's configuration, or check it matches the recorded one.

        Returns the fingerprint. A different fingerprint is refused: mixing result sets made
        with different settings in one OUT would make the outputs lie.
        """
        fingerprint = config.fingerprint()
        record: dict[str, Any] = {
            "fingerprint": fingerprint,
            "settings": config.fingerprint_fields(),
            "run": config.public_dump(),
        }
        blob = json.dumps(record, indent=2, sort_keys=True).encode()
        if self.store.create_exclusive(self._key("config.json"), blob):
            return fingerprint
        existing = self.recorded_config()
        if existing.get("fingerprint") != fingerprint:
            raise WorkspaceError(
                _mismatch_message(existing.get("settings", {}), record["settings"])
            )
        return fingerprint

    def recorded_run_config(self) -> RunConfig:
        """The full configuration of the first run (secrets excluded), to resume or retry it."""
        record = self.recorded_config()
        if "run" not in record:
            raise WorkspaceError(f"{self.store.root} holds no ocrflow run")
        return RunConfig.model_validate(record["run"])

    def requeue(self, statuses: set[str], reasons: set[str] | None = None) -> set[str]:
        """Forget finished documents with these statuses (and reasons); return their ids."""
        requeued = set()
        for record in self.done_records():
            if record.status in statuses and (not reasons or record.reason in reasons):
                self.clear_done(record.doc_id)
                requeued.add(record.doc_id)
        return requeued

    def recorded_config(self) -> dict[str, Any]:
        """The configuration recorded by the first run, or ``{}``."""
        blob = self.store.read_bytes(self._key("config.json"))
        return json.loads(blob) if blob else {}

    # -- documents -----------------------------------------------------------------------
    def done_record(self, doc_id: str) -> DoneRecord | None:
        """The done marker of a finished document, or ``None``."""
        blob = self.store.read_bytes(self._key("done", f"{doc_id}.json"))
        return DoneRecord.load(blob) if blob else None

    def mark_done(self, result: DocumentResult, *, rel: str = "", content_sha256: str = "") -> None:
        """Write the done marker. Call only after the document's outputs are written."""
        record = DoneRecord(
            **DoneRecord.fields_of(result),
            pages=tuple(PageSummary.model_validate(_page_summary(p)) for p in result.pages),
            finished=time.time(),
            rel=rel,
            content_sha256=content_sha256,
        )
        self.store.write_bytes(self._key("done", f"{result.doc_id}.json"), record.dump())

    def clear_done(self, doc_id: str) -> None:
        """Forget that a document finished, so the next run does it again."""
        self.store.delete(self._key("done", f"{doc_id}.json"))

    def done_ids(self) -> set[str]:
        """Ids of the documents with a done marker (one listing, no reads)."""
        return {
            k.rsplit("/", 1)[-1].removesuffix(".json") for k in self.store.list(self._key("done"))
        }

    def done_records(self) -> list[DoneRecord]:
        """Every done marker."""
        return list(self.iter_done_records())

    def iter_done_records(self) -> Iterator[DoneRecord]:
        """Every done marker, read one at a time (one listing, then a read each): memory
        holds one marker, however many documents the run has. A marker removed since the
        listing (a retry) is skipped."""
        for key in self.store.list(self._key("done")):
            if not key.endswith(".json"):
                continue
            blob = self.store.read_bytes(key)
            if blob:
                yield DoneRecord.load(blob)

    # -- page checkpoints ----------------------------------------------------------------
    def save_pages(self, doc_id: str, pages: list[PageResult]) -> None:
        """Checkpoint finished pages of an unfinished document.

        Figure crops go first, each as a blob beside the checkpoint; the page list is the
        commit point, so a kill in between leaves only orphan blobs the next save replaces.
        """
        if not pages:
            return
        for page in pages:
            for figure in page.figures:
                if figure.png is not None:
                    name = figure_blob_name(figure.page, figure.index)
                    self.store.write_bytes(self._key("pages", doc_id, name), figure.png)
        first, last = min(p.page for p in pages), max(p.page for p in pages)
        blob = _dumps([page_to_dict(p) for p in pages])
        self.store.write_bytes(self._key("pages", doc_id, f"{first:06d}-{last:06d}.json"), blob)

    def load_pages(self, doc_id: str) -> dict[int, PageResult]:
        """Pages checkpointed by earlier, interrupted runs, with their figure crops (small
        PNGs, read eagerly: a document's crops are held until it is written anyway)."""
        pages: dict[int, PageResult] = {}
        for key in self.store.list(self._key("pages", doc_id)):
            if not key.endswith(".json"):
                continue
            blob = self.store.read_bytes(key)
            for data in json.loads(blob) if blob else []:
                page = self._with_crops(doc_id, page_from_dict(data))
                if page is not None:  # a lost crop: the page is converted again
                    pages[page.page] = page
        return pages

    def _with_crops(self, doc_id: str, page: PageResult) -> PageResult | None:
        if not page.figures:
            return page
        figures = []
        for figure in page.figures:
            name = figure_blob_name(figure.page, figure.index)
            png = self.store.read_bytes(self._key("pages", doc_id, name))
            if png is None:
                return None
            figures.append(replace(figure, png=png))
        return replace(page, figures=tuple(figures))

    # -- step checkpoints (multi-step recipes) --------------------------------------------
    def save_steps(self, doc_id: str, page: int, record: Mapping[str, Any]) -> None:
        """Checkpoint the finished steps of one page of a multi-step recipe (its first read,
        the answers of its further requests), beside the page checkpoints: the document's
        ``clear_pages`` drops it, and ``load_pages`` (which reads ``.json``) skips it."""
        blob = _dumps(dict(record))
        self.store.write_bytes(self._key("pages", doc_id, step_blob_name(page)), blob)

    def load_steps(self, doc_id: str, page: int) -> dict[str, Any] | None:
        """The step checkpoint of one page, or None."""
        blob = self.store.read_bytes(self._key("pages", doc_id, step_blob_name(page)))
        return json.loads(blob) if blob else None

    def clear_pages(self, doc_id: str) -> None:
        """Drop a finished document's checkpoints."""
        for key in self.store.list(self._key("pages", doc_id)):
            self.store.delete(key)

    def log_dir(self) -> str | None:
        """A local folder for server logs, when the workspace is on local disk."""
        root = getattr(self.store, "root", "")
        if "://" in root:
            return None
        return f"{root}/{WORKSPACE_DIR}/logs"

    # -- runs ----------------------------------------------------------------------------
    def record_run(self, record: RunRecord) -> None:
        """Save one run's (or worker's) figures for ``ocrflow status``."""
        self.store.write_bytes(self._key("runs", f"{record.run_id}.json"), record.dump())

    def run_records(self) -> list[RunRecord]:
        """Every recorded run, oldest first."""
        records = []
        for key in self.store.list(self._key("runs")):
            blob = self.store.read_bytes(key)
            if blob:
                records.append(RunRecord.load(blob))
        return sorted(records, key=lambda r: r.started)


def _page_summary(page: PageResult) -> dict[str, Any]:
    summary = page_to_dict(page)
    summary.pop("text")
    return summary


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _mismatch_message(old: dict[str, Any], new: dict[str, Any]) -> str:
    changed = ", ".join(
        f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(new) if old.get(k) != new.get(k)
    )
    return (
        f"this output directory holds results made with other settings ({changed}); "
        "use another -o, or the same settings to resume"
    )
