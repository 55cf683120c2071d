"""Which documents a review shows: every finished document of a run, streamed one done
marker at a time (``sinks.results.done_markers``), narrowed by ``--only`` and sampled
reproducibly by ``--sample``.

``--only low-confidence`` keeps documents with a page below the bar (``low-confidence<X``
names another bar than ``DEFAULT_BELOW``; ``ocrflow review --below X`` writes it so) and
shows them worst first: ordered by their lowest page confidence, ascending. That order
needs every kept document's marker at hand, so it holds the kept ones (not the run's).

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
from ocrflow.observe.confidence_spread import lowest_confidence
from ocrflow.types import DocStatus, Route
from ocrflow.workspace.records import DoneRecord

DEFAULT_SEED = 0
#: ``--only low-confidence`` without ``--below``: pages under this are shown.
DEFAULT_BELOW = 0.8
LOW_CONFIDENCE = "low-confidence"


def is_failed(record: DoneRecord) -> bool:
    """The document produced no text."""
    return record.status is DocStatus.FAILED


def is_partial(record: DoneRecord) -> bool:
    """Some of the document's pages failed or fell back."""
    return record.status is DocStatus.PARTIAL


def has_fallback(record: DoneRecord) -> bool:
    """At least one page was read by a fallback (text layer or CPU engine) instead."""
    return any(page.route == Route.FALLBACK for page in record.pages)


def is_low_confidence(record: DoneRecord, below: float = DEFAULT_BELOW) -> bool:
    """A page's confidence is under ``below`` (``document.confidence``)."""
    lowest = lowest_confidence(record)
    return lowest is not None and lowest < below


ONLY: Mapping[str, Callable[[DoneRecord], bool]] = MappingProxyType(
    {
        "failed": is_failed,
        "partial": is_partial,
        "fallback": has_fallback,
        LOW_CONFIDENCE: is_low_confidence,
    }
)


def low_confidence_filter(below: float | None) -> str:
    """The ``--only`` value of ``--only low-confidence --below X``."""
    if below is None:
        return LOW_CONFIDENCE
    if not 0.0 < below <= 1.0:
        raise ConfigError(f"--below {below}: give a confidence above 0 and at most 1")
    return f"{LOW_CONFIDENCE}<{below:g}"


def confidence_bar(only: Iterable[str]) -> float | None:
    """The confidence bar of the ``--only`` values (``None``: no low-confidence filter)."""
    for value in only:
        name, _, bar = value.partition("<")
        if name == LOW_CONFIDENCE:
            return _bar(value, bar) if bar else DEFAULT_BELOW
    return None


def _bar(value: str, text: str) -> float:
    try:
        below = float(text)
    except ValueError:
        raise ConfigError(f"--only {value}: the bar after < must be a number") from None
    if not 0.0 < below <= 1.0:
        raise ConfigError(f"--only {value}: give a confidence above 0 and at most 1")
    return below


def parse_only(values: Iterable[str]) -> tuple[str, ...]:
    """``--only`` values (repeatable or comma-separated) checked against ``ONLY``."""
    chosen = tuple(dict.fromkeys(v.strip().lower() for x in values for v in x.split(",")))
    chosen = tuple(v for v in chosen if v)
    unknown = [v for v in chosen if v.partition("<")[0] not in ONLY]
    if unknown:
        raise ConfigError(
            f"--only {', '.join(unknown)}: choose from {', '.join(ONLY)} (several: failed,partial)"
        )
    confidence_bar(chosen)  # a bad bar is refused here, before anything is read
    return chosen


def matches(record: DoneRecord, only: tuple[str, ...]) -> bool:
    """Whether ``record`` passes the ``--only`` filters (any of them; none passes all)."""
    if not only:
        return True
    bar = confidence_bar(only)
    for value in only:
        name = value.partition("<")[0]
        if name == LOW_CONFIDENCE:
            if is_low_confidence(record, bar if bar is not None else DEFAULT_BELOW):
                return True
        elif ONLY[name](record):
            return True
    return False


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
    """The records to show, in stream order (a sample: by source name; with a
    low-confidence filter: worst first, by ``worst_first``).

    ``counter`` sees every record before filtering (to tell "12 of 40,000 documents").
    """
    stream = _counted(records, counter) if counter else iter(records)
    kept: Iterable[DoneRecord] = (r for r in stream if matches(r, only))
    worst = confidence_bar(only) is not None
    if sample is None:
        yield from worst_first(kept) if worst else kept
        return
    if sample < 1:
        raise ConfigError("--sample must be at least 1")
    chosen = heapq.nsmallest(sample, kept, key=lambda r: sample_key(r.doc_id, seed))
    if worst:
        yield from worst_first(chosen)
        return
    yield from sorted(chosen, key=lambda r: (r.rel or r.source, r.doc_id))


def worst_first(records: Iterable[DoneRecord]) -> list[DoneRecord]:
    """``records`` by their lowest page confidence, ascending (unknown last), then name."""

    def key(record: DoneRecord) -> tuple[float, str, str]:
        lowest = lowest_confidence(record)
        return (2.0 if lowest is None else lowest, record.rel or record.source, record.doc_id)

    return sorted(records, key=key)


def _counted(
    records: Iterable[DoneRecord], counter: Callable[[DoneRecord], None]
) -> Iterator[DoneRecord]:
    for record in records:
        counter(record)
        yield record
