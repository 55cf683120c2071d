"""Figures as workspace records: what describe leaves for assemble.

The stages talk only through the workspace:

- ``.ocrflow/figures/<doc id>.json`` (a ``FigureDocument``, ``sinks/figure_records.py``):
  written by extract (the figure sink) for each finished document that has figures.
- ``.ocrflow/describe/<set>/<doc id>/p<page>-<n>.json`` (a ``FigureResult``): one per
  described figure, written by describe as soon as its answer arrives; its existence is
  what makes a rerun skip the figure. ``<set>`` is the fingerprint of the describe settings
  (task, prompt, model), so another task or model starts a result set of its own.
- ``.ocrflow/describe/latest.json`` (a ``DescribeSet``): the settings of the last describe
  run; assemble uses its results.
"""

from __future__ import annotations

import hashlib
import json

from ocrflow.sinks.figure_records import FigureKey
from ocrflow.storage.local import Store
from ocrflow.workspace.records import StoredRecord
from ocrflow.workspace.state import WORKSPACE_DIR

DESCRIBE_DIR = f"{WORKSPACE_DIR}/describe"


LATEST_KEY = f"{DESCRIBE_DIR}/latest.json"


class FigureResult(StoredRecord):
    """What describe got for one figure. ``markdown`` is what assemble places after the
    figure's link (a table for a tabular ``parse`` answer); ``text`` is the raw answer."""

    doc_id: str
    page: int
    index: int
    status: str = "ok"  # "ok" or "failed" (a rerun tries failed figures again)
    task: str = "caption"
    text: str = ""
    markdown: str = ""
    error: str | None = None
    attempts: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0


class DescribeSet(StoredRecord):
    """The settings of a describe run; their fingerprint names its result set."""

    task: str
    prompt: str
    model: str

    @property
    def fingerprint(self) -> str:
        blob = json.dumps(self.model_dump(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


# -- describe: results ---------------------------------------------------------------------
def result_prefix(set_id: str, doc_id: str = "") -> str:
    return f"{DESCRIBE_DIR}/{set_id}/{doc_id}" if doc_id else f"{DESCRIBE_DIR}/{set_id}"


def result_key(set_id: str, doc_id: str, page: int, index: int) -> str:
    return f"{result_prefix(set_id, doc_id)}/p{page}-{index}.json"


def save_result(store: Store, set_id: str, result: FigureResult) -> None:
    store.write_bytes(result_key(set_id, result.doc_id, result.page, result.index), result.dump())


def described_keys(store: Store, set_id: str, doc_id: str) -> set[FigureKey]:
    """Figures of a document with a successful result in the set."""
    return {k for k, r in load_results(store, set_id, doc_id).items() if r.status == "ok"}


def load_results(store: Store, set_id: str, doc_id: str) -> dict[FigureKey, FigureResult]:
    """Every result of a document in the set, by (page, index)."""
    results: dict[FigureKey, FigureResult] = {}
    for key in store.list(result_prefix(set_id, doc_id)):
        blob = store.read_bytes(key)
        if blob:
            result = FigureResult.load(blob)
            results[(result.page, result.index)] = result
    return results


def save_latest(store: Store, settings: DescribeSet) -> None:
    store.write_bytes(LATEST_KEY, settings.dump())


def load_latest(store: Store) -> DescribeSet | None:
    blob = store.read_bytes(LATEST_KEY)
    return DescribeSet.load(blob) if blob else None
