"""Which documents a review shows: every finished document of a run, streamed one done
marker at a time (``sinks.results.done_markers``), narrowed by ``--only`` and sampled
reproducibly by ``--sample``.

Memory stays bounded by the sample, not the run: markers are read one by one, and a sample
keeps the ``n`` documents with the smallest seeded hash of their id (``heapq.nsmallest``
over the stream). The same seed picks the same documents whatever order the store lists them
in, and growing ``n`` only adds documents.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType

from ocrflow.errors import ConfigError
from ocrflow.types import DocStatus, Route
from ocrflow.workspace.records import DoneRecord

DEFAULT_SEED = 0


def is_failed(record: DoneRecord) -> bool:
    """The document produced no text."""
    return record.status is DocStatus.FAILED


def is_partial(record: DoneRecord) -> bool:
    """Some of the document's pages failed or fell back."""
    return record.status is DocStatus.PARTIAL


def has_fallback(record: DoneRecord) -> bool:
    """At least one page was read by a fallback (text layer or CPU engine) instead."""
    return any(page.route == Route.FALLBACK for page in record.pages)


ONLY: Mapping[str, Callable[[DoneRecord], bool]] = MappingProxyType(
    {"failed": is_failed, "partial": is_partial, "fallback": has_fallback}
)


def parse_only(values: Iterable[str]) -> tuple[str, ...]:
    """``--only`` values (repeatable or comma-separated) checked against ``ONLY``."""
    chosen = tuple(dict.fromkeys(v.strip().lower() for x in values for v in x.split(",")))
    chosen = tuple(v for v in chosen if v)
    unknown = [v for v in chosen if v not in ONLY]
    if unknown:
        raise ConfigError(
            f"--only {', '.join(unknown)}: choose from {', '.join(ONLY)} (several: failed,partial)"
        )
    return chosen


def matches(record: DoneRecord, only: tuple[str, ...]) -> bool:
    """Whether ``record`` passes the ``--only`` filters (any of them; none passes all)."""
    return not only or any(ONLY[name](record) for name in only)


def sample_key(doc_id: str, seed: int) -> bytes:
    """The seeded hash that orders documents for sampling."""
    return hashlib.sha256(f"{seed}:{doc_id}".encode()).digest()


def select_records(
    records: Iterable[DoneRecord],
    *,
    only: tuple[str, ...] = (),
    sample: int | None = None,
    seed: int = DEFAULT_SEED,
    counter: Callable[[DoneRecord], None] | None = None,
) -> Iterator[DoneRecord]:
    """The records to show, in stream order (a sample: by source name).

    ``counter`` sees every record before filtering (to tell "12 of 40,000 documents").
    """
    stream = _counted(records, counter) if counter else iter(records)
    kept = (r for r in stream if matches(r, only))
    if sample is None:
        yield from kept
        return
    if sample < 1:
        raise ConfigError("--sample must be at least 1")
    chosen = heapq.nsmallest(sample, kept, key=lambda r: sample_key(r.doc_id, seed))
    yield from sorted(chosen, key=lambda r: (r.rel or r.source, r.doc_id))


def _counted(
    records: Iterable[DoneRecord], counter: Callable[[DoneRecord], None]
) -> Iterator[DoneRecord]:
    for record in records:
        counter(record)
        yield record
