"""Fuzzy string matching with the reference benchmark's semantics.

``ratio``/``partial_ratio`` are rapidfuzz's (the reference calls the same functions).
:func:`find_near_matches` re-implements the contract of ``fuzzysearch.find_near_matches``
with ``max_l_dist``: every substring within that Levenshtein distance of the pattern,
overlapping matches merged into groups, and per group the closest (then longest) match.
"""

from __future__ import annotations

from dataclasses import dataclass

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein


@dataclass(frozen=True, order=True)
class NearMatch:
    """One approximate occurrence: ``text[start:end]`` is ``dist`` edits from the pattern."""

    start: int
    end: int
    dist: int


def ratio(a: str, b: str) -> float:
    """Normalised Indel similarity in 0..1 (rapidfuzz ``fuzz.ratio`` / 100)."""
    return float(fuzz.ratio(a, b)) / 100.0


def partial_ratio(needle: str, haystack: str) -> float:
    """Best ``ratio`` of ``needle`` against any window of ``haystack``, in 0..1."""
    return float(fuzz.partial_ratio(needle, haystack)) / 100.0


def _exact_matches(pattern: str, text: str) -> list[NearMatch]:
    found, start = [], text.find(pattern)
    while start != -1:
        found.append(NearMatch(start, start + len(pattern), 0))
        start = text.find(pattern, start + 1)
    return found


def _candidate_starts(pattern: str, text: str, max_dist: int) -> list[int]:
    """Starts a match can have. Cut the pattern into ``max_dist + 1`` pieces: a match with
    at most ``max_dist`` edits leaves one piece intact, found exactly in the text no more
    than ``max_dist`` characters away from where the piece sits in the pattern."""
    pieces = max_dist + 1
    size = len(pattern) // pieces
    starts: set[int] = set()
    for index in range(pieces):
        offset = index * size
        piece = pattern[offset : offset + size] if index < pieces - 1 else pattern[offset:]
        found = text.find(piece)
        while found != -1:
            low = max(0, found - offset - max_dist)
            starts.update(range(low, min(len(text), found - offset + max_dist) + 1))
            found = text.find(piece, found + 1)
    return sorted(starts)


def _all_matches(pattern: str, text: str, max_dist: int) -> list[NearMatch]:
    """Every (start, end) whose substring is within ``max_dist`` edits of ``pattern``."""
    m, found = len(pattern), []
    if m <= max_dist:  # even the empty string matches: fall back to every start
        starts: list[int] = list(range(len(text) + 1))
    else:
        starts = _candidate_starts(pattern, text, max_dist)
    for start in starts:
        for length in range(max(0, m - max_dist), m + max_dist + 1):
            if start + length > len(text):
                break
            window = text[start : start + length]
            dist = Levenshtein.distance(pattern, window, score_cutoff=max_dist)
            if dist <= max_dist:
                found.append(NearMatch(start, start + length, dist))
    return found


def _consolidate(matches: list[NearMatch]) -> list[NearMatch]:
    """Merge overlapping matches into groups; keep the closest, then longest, of each."""
    groups: list[tuple[int, int, list[NearMatch]]] = []
    for match in sorted(matches):
        if groups and match.start < groups[-1][1]:
            start, end, members = groups[-1]
            groups[-1] = (start, max(end, match.end), [*members, match])
        else:
            groups.append((match.start, match.end, [match]))
    best = [min(members, key=lambda m: (m.dist, -(m.end - m.start))) for _, _, members in groups]
    return sorted(best)


def find_near_matches(pattern: str, text: str, max_l_dist: int) -> list[NearMatch]:
    """Approximate occurrences of ``pattern`` in ``text`` (at most ``max_l_dist`` edits)."""
    if not pattern:
        raise ValueError("empty pattern")
    if max_l_dist == 0:
        return _exact_matches(pattern, text)
    return _consolidate(_all_matches(pattern, text, max_l_dist))
