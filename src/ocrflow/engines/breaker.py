"""A circuit breaker per server: say at once when every request to a server fails, hold
pages back from it while it does, and let one request through now and then to see whether
it recovered.

Closed (normal) → open: ``failures`` requests in a row failed and the first of them is at
least ``window_s`` old (a burst of a few errors from a live server does not open it); a
health check that drains the server opens it at once. Open: requests wait on our side
instead; every ``probe_every_s`` one request goes as a probe (half-open); its success
closes the breaker, its failure keeps it open. The engine stops the run once every
server's breaker is open and has been failing for ``fail_after_s``.

What counts as a failure: no answer (refused, reset, timed out), an HTTP status of 408,
429 or 5xx, a body that is not JSON, a completion without a choice. An answer the server
gives on purpose (a 4xx rejection, a reply whose text is empty) is not a server failure.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger("ocrflow.engine")


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """When a server counts as failing, how often it is probed, and when a run gives up."""

    #: Failed requests in a row that open the breaker ...
    failures: int = 5
    #: ... once the first of them is this old (seconds).
    window_s: float = 10.0
    #: While open, one request every this many seconds goes to the server as a probe.
    probe_every_s: float = 5.0
    #: Every server failing (breaker open) for this long, from the first failure of its
    #: streak: the run stops (``ocrflow`` exits 4). 0: never stop.
    fail_after_s: float = 120.0


@dataclass
class CircuitBreaker:
    """The breaker of one server (``name`` is its URL, for the log)."""

    name: str
    policy: BreakerPolicy = BreakerPolicy()
    #: Failed requests since the last success.
    streak: int = 0
    #: ``time.monotonic()`` of the streak's first failure (None: no streak).
    failing_since: float | None = None
    is_open: bool = False
    #: What the last failure was (an HTTP status, a parse error), for messages.
    cause: str = ""
    _last_probe: float = -1e18
    _probing: bool = False

    def failed(self, cause: str, now: float) -> None:
        """Count a failed request (or a failed probe)."""
        self._probing = False
        self.cause = cause
        self.streak += 1
        if self.failing_since is None:
            self.failing_since = now
        if not self.is_open and self._tripped(now):
            self._open(now)

    def trip(self, cause: str, now: float) -> None:
        """Open at once (the server's health check failed)."""
        self.cause = cause
        if self.failing_since is None:
            self.failing_since = now
        if not self.is_open:
            self._open(now)

    def succeeded(self, now: float) -> None:
        """A request got an answer: close, and say so when it was open."""
        if self.is_open:
            since = self.failing_for(now)
            log.warning("server %s answers again (it failed for %s s)", self.name, _seconds(since))
        self.is_open = self._probing = False
        self.streak = 0
        self.failing_since = None
        self.cause = ""

    def allows(self, now: float) -> bool:
        """Whether a request may go now: always while closed; while open, one probe at a
        time, every ``probe_every_s``. A ``True`` while open is that probe."""
        if not self.is_open:
            return True
        if self._probing or now - self._last_probe < self.policy.probe_every_s:
            return False
        self._probing = True
        self._last_probe = now
        return True

    def probe_soon(self) -> None:
        """Let the next request go as a probe at once (the server's health check passes
        again)."""
        self._last_probe = -1e18

    def probe_ended(self) -> None:
        """The probe ended without a verdict (cancelled): another may go at its time."""
        self._probing = False

    def failing_for(self, now: float) -> float:
        """Seconds this server has been failing while open, 0 while closed."""
        if not self.is_open or self.failing_since is None:
            return 0.0
        return now - self.failing_since

    def _tripped(self, now: float) -> bool:
        assert self.failing_since is not None
        old_enough = now - self.failing_since >= self.policy.window_s
        return self.streak >= self.policy.failures and old_enough

    def _open(self, now: float) -> None:
        self.is_open = True
        self._last_probe = now
        since = self.failing_for(now)
        log.warning(
            "server %s is failing: %d requests in a row failed over %s s, the last with %s; "
            "pages wait and one is sent every %s s to see if it recovers",
            self.name, self.streak, _seconds(since), self.cause,
            _seconds(self.policy.probe_every_s),
        )  # fmt: skip


def all_failing(breakers: list[CircuitBreaker], now: float) -> bool:
    """Whether every server has been failing for the policy's ``fail_after_s`` (never when
    it is 0)."""
    if not breakers or any(b.policy.fail_after_s <= 0 for b in breakers):
        return False
    return all(b.failing_for(now) >= b.policy.fail_after_s for b in breakers)


def failing_message(breakers: list[CircuitBreaker], now: float) -> str:
    """One sentence naming every server and why it fails, for the error that stops a run."""
    parts = [f"{b.name} ({b.cause or 'no answer'})" for b in breakers]
    seconds = _seconds(min(b.failing_for(now) for b in breakers))
    return (
        f"every server failed every request for {seconds} s: {'; '.join(parts)}. "
        "Unfinished pages stay pending: fix the server and run the same command again "
        "(--fail-after sets the wait)"
    )


def _seconds(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"
