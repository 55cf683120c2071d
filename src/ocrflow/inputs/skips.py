"""Files an input's walk or glob leaves out, counted by reason: a run says what it did not
convert (its summary, ``ocrflow status``, ``--json``), not only what it did."""

from __future__ import annotations

import enum
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ocrflow.storage.names import shown

if TYPE_CHECKING:
    from ocrflow.storage.local import Store

#: Where a workspace keeps what its latest planning left out.
SKIPPED_KEY = ".ocrflow/skipped.json"
_EXAMPLES = 5


class SkipReason(enum.StrEnum):
    """Why a walk or glob left a file out (counted in the summary, ``status``, ``--json``).
    A file named explicitly is never skipped: it gets a document status."""

    HIDDEN = "hidden"  # its name, or its folder's, starts with "."
    NOT_A_DOCUMENT = "not_a_document"  # neither its content nor its suffix says PDF or image
    DATASET = "dataset_in_folder"  # a Parquet file among documents: name it to read its rows
    NOT_A_FILE = "not_a_file"  # a device, FIFO or socket
    LINK_TO_FOLDER = "link_to_folder"  # links to folders are not followed
    BROKEN_LINK = "broken_link"  # a link to nothing, or a loop
    UNREADABLE = "unreadable"  # vanished, or no permission to look at it
    OCRFLOW_OUTPUT = "ocrflow_output"  # an ocrflow OUT or review site (counted once a folder)
    IN_OUTPUT = "in_output"  # under this run's own OUT
    PATH_NOT_ALLOWED = "path_not_allowed"  # restricted runs: a link out of the allowed folders


@dataclass
class Skipped:
    """Files the inputs' walks and globs left out: a count by reason, and the first few
    paths of each reason (shown with ``names.shown``: safe to print and to put in JSON)."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, reason: SkipReason, path: str) -> None:
        """Count one file (or folder) left out for ``reason``."""
        self.counts[reason.value] += 1
        names = self.examples.setdefault(reason.value, [])
        if len(names) < _EXAMPLES:
            names.append(shown(path))

    def summary(self) -> str:
        """``3 not_a_document, 1 hidden`` (most frequent first); ``""`` when none."""
        return ", ".join(f"{n} {reason}" for reason, n in self.counts.most_common())


def save_skipped(store: Store, skipped: Skipped) -> None:
    """Record what the latest planning of OUT left out (``ocrflow status`` shows it)."""
    data = {"counts": dict(skipped.counts), "examples": skipped.examples}
    store.write_bytes(SKIPPED_KEY, json.dumps(data).encode())


def load_skipped(store: Store) -> Skipped:
    """What the latest planning of OUT left out (nothing for an OUT planned before skips
    were recorded)."""
    blob = store.read_bytes(SKIPPED_KEY)
    if not blob:
        return Skipped()
    data = json.loads(blob)
    return Skipped(Counter(data.get("counts") or {}), dict(data.get("examples") or {}))
