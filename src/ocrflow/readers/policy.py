"""Retry policy as data: how long to back off on transport errors, and what each attempt does."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TransportPolicy:
    """Backoff for transient failures (connect errors, timeouts, 429, 5xx).

    A transient failure does not consume an attempt; the page's deadline bounds the total.
    """

    base_s: float = 0.5
    cap_s: float = 20.0
    #: Everything for one page, attempts and backoff included, ends by this deadline.
    page_deadline_s: float = 600.0
    #: Each request may use at most this long (also capped by what is left of the deadline).
    request_timeout_s: float = 180.0

    def backoff_s(self, failures: int, rng: random.Random) -> float:
        """Full-jitter exponential backoff after ``failures`` consecutive failures."""
        ceiling = min(self.cap_s, self.base_s * 2 ** min(failures, 16))
        return rng.uniform(0, ceiling)


@dataclass(frozen=True, slots=True)
class AttemptPolicy:
    """What to change between attempts at one page."""

    #: Context overflow: shrink the image by this factor, at most ``max_shrinks`` times.
    shrink_factor: float = 0.7
    max_shrinks: int = 2
    min_dim: int = 384
    #: Rotation the model reported: re-read the page turned, at most this many times.
    max_rotations: int = 1
    #: Share of a document's pages that may fall back before it is marked partial.
    max_page_error_rate: float = 0.0
