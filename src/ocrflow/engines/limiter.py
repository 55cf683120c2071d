"""The in-flight limit of one replica, steered by the server's queue (``/metrics``) or, without
metrics, by how often the server refuses work. ``OpenAIEngine`` owns one per replica."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class ReplicaLimiter:
    """The in-flight limit of one replica.

    With metrics the limit follows the server's queue: it aims at ``target_waiting``
    requests waiting in the server (so its batch never runs dry, and no request sits in
    its queue long enough to time out). Without metrics it grows slowly while all is well
    and shrinks when the server refuses work often (a rate limiter in front of it).
    """

    limit: float
    floor: int = 1
    ceiling: int = 1024
    adaptive: bool = True
    #: Requests we want waiting in the server's queue so its batch never runs dry: at
    #: least ``target_waiting``, and ``waiting_share`` of its running batch on big servers.
    #: Measured on one H100 (olmOCR-2, ~350 running): a client that kept ~1 waiting had
    #: 295-337 running, one that sent everything had 10-21 waiting and 352-363 running.
    target_waiting: int = 8
    waiting_share: float = 0.05
    #: Share of recent answers that were 429/503 above which the limit is cut.
    overload_share: float = 0.1
    #: Weight of the newest answer in the running overload share (about 1/20 answers).
    overload_weight: float = 0.05
    #: Whether the server held more than ``target_waiting`` in its queue with its batch
    #: no bigger than now: until then its batch may have much more room, and the limit
    #: grows fast. ``_last_waiting``: the server's queue at the previous poll;
    #: ``_queue_running``: its batch when the queue was last seen.
    queue_seen: bool = False
    #: A batch this much bigger than when the queue was seen shows that queue was a slow
    #: step (a server's first requests, a burst of prefill), not a full batch.
    regrow_factor: float = 1.25
    #: A server that shows less than ``partial_view`` of our requests (running + waiting)
    #: at every poll for ``partial_window_s`` is one of several behind one address (a load
    #: balancer, servers sharing a port): its figures are then scaled up to stand for all
    #: we sent. Shorter gaps are requests on the wire or in the server's pre-processing.
    partial_view: float = 0.75
    partial_window_s: float = 5.0
    _partial_since: float | None = None
    _last_waiting: float = 0.0
    _queue_running: float = 0.0
    _overloaded: float = 0.0
    _last_cut: float = -1e9

    def on_metrics(
        self,
        running: float,
        waiting: float,
        in_flight: int,
        saturated: bool,
        now: float | None = None,
    ) -> None:
        """Steer by the server's queue.

        ``saturated``: pages are waiting on our side (the limit, not the supply of pages,
        holds us back); only then is growing worth anything. Corrections are scaled by our
        share of the server's requests, so that several clients of one server together
        correct its queue once, not once each. ``now``: ``time.monotonic()`` by default.
        """
        if not self.adaptive:
            return
        scale = self._view_scale(
            running + waiting, in_flight, time.monotonic() if now is None else now
        )
        running, waiting = running * scale, waiting * scale
        at_server = running + waiting
        share = min(1.0, in_flight / at_server) if at_server > 0 else 1.0
        target = max(float(self.target_waiting), self.waiting_share * running)
        # The queue breathes: a wave of answers leaves the batch and their successors wait
        # a step to join it; pages arrive a rendered chunk at a time. So only what two
        # polls in a row agree on counts: a queue seen at both, or room seen at both.
        queue = min(waiting, self._last_waiting)
        room = max(waiting, self._last_waiting)
        self._last_waiting = waiting
        if self.queue_seen and running > self.regrow_factor * self._queue_running:
            # A server that just started queues behind its first, slow steps: that queue
            # must not hold the ramp to slow growth once its batch has clearly grown past it.
            self.queue_seen = False
        if queue > target:
            # Cut from what is really out: requests sent cannot be called back, so until
            # they finish the queue stays long; a cut taken from the limit again at every
            # poll would take the same excess away over and over, down to the floor.
            self.queue_seen = True
            self._queue_running = running
            self.limit = min(self.limit, in_flight - (queue - target) * share)
        elif saturated and 0 < room < target / 2:
            self.limit += (target - room) * share  # a short queue: top it up
        elif saturated and room == 0 and running >= 0.9 * in_flight:
            # No queue and (nearly) all we sent is running: the batch may have room. Grow
            # by a share of the limit (50% until a real queue was ever seen, then 25%); an
            # overshoot shows as a queue at the next polls and is taken back there.
            growth = self.limit * (0.25 if self.queue_seen else 0.5)
            self.limit += max(target * share, growth)
        # Otherwise a wave of answers just left the batch and their successors are on the
        # wire: the snapshot says nothing about room, so leave the limit be.
        self._clamp()

    def _view_scale(self, at_server: float, in_flight: int, now: float) -> float:
        """1, or ``in_flight / at_server`` once the server has shown only part of our
        requests for ``partial_window_s`` (one of several servers behind one address).

        Without it the limit never grew there: its rule is "nearly all we sent is running",
        and one of two servers shows half (two H100s behind one port: 6.6 pages/s against
        the bare client's 15.6).
        """
        if in_flight < self.target_waiting or at_server >= self.partial_view * in_flight:
            self._partial_since = None
            return 1.0
        if self._partial_since is None:
            self._partial_since = now
        if at_server <= 0 or now - self._partial_since < self.partial_window_s:
            return 1.0
        return in_flight / at_server

    def on_answer(self, overloaded: bool, now: float) -> None:
        """Count one answer; cut the limit when refusals are frequent, at most once a second.

        A few scattered 429s (a busy proxy, an injected fault) must not collapse the
        limit: only a share of refusals above ``overload_share`` is taken as "too much".
        """
        if not self.adaptive:
            return
        w = self.overload_weight
        self._overloaded = self._overloaded * (1 - w) + (w if overloaded else 0.0)
        if overloaded and self._overloaded > self.overload_share and now - self._last_cut >= 1:
            self._last_cut = now
            self.limit *= 0.75
            self._clamp()

    def on_success(self, has_metrics: bool, saturated: bool) -> None:
        """Without metrics, creep up by one request per limit's worth of successes."""
        if self.adaptive and not has_metrics and saturated:
            self.limit += 1 / max(self.limit, 1)
            self._clamp()

    def _clamp(self) -> None:
        self.limit = min(float(self.ceiling), max(float(self.floor), self.limit))
