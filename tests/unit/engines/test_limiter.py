"""ReplicaLimiter: the adaptive in-flight limit, fed the server's /metrics as OpenAIEngine
does at each poll (running, waiting, our requests in flight, pages waiting on our side)."""

from __future__ import annotations

from ocrflow.engines.limiter import ReplicaLimiter


def _cold_start(limiter: ReplicaLimiter) -> None:
    """A server's first, slow steps: the requests of the first growth wait two polls."""
    limiter.on_metrics(32, 0, 32, True)  # all running, no queue: +50 %
    assert limiter.limit == 48
    limiter.on_metrics(32, 16, 48, True)  # one poll of queue says nothing yet
    limiter.on_metrics(32, 16, 48, True)  # two do: cut to what is out less the excess
    assert limiter.limit == 40 and limiter.queue_seen


def test_a_queue_behind_a_slow_first_step_does_not_slow_the_ramp() -> None:
    # Issue 12: ocrflow's own vLLM (cold) queued its first requests for a moment; the
    # limit then grew by 25 % at each poll instead of 50 % for the rest of the ramp.
    limiter = ReplicaLimiter(32)
    _cold_start(limiter)
    limiter.on_metrics(48, 0, 48, True)  # the batch took them all: it was not full
    assert not limiter.queue_seen
    limiter.on_metrics(48, 0, 48, True)  # no queue at two polls, all running: +50 %
    assert limiter.limit == 60


def test_a_queue_at_a_full_batch_keeps_growth_slow() -> None:
    limiter = ReplicaLimiter(240)
    limiter.on_metrics(200, 40, 240, True)
    limiter.on_metrics(200, 40, 240, True)  # max-num-seqs 200: a real queue
    assert limiter.limit == 210 and limiter.queue_seen  # 10 left waiting: 5 % of 200
    limiter.on_metrics(220, 0, 220, True)  # a little more room (shorter prompts)
    limiter.on_metrics(220, 0, 220, True)
    assert limiter.queue_seen
    assert limiter.limit == 210 * 1.25  # growth stays at 25 % near the batch's size


def test_a_big_batch_keeps_a_queue_in_proportion() -> None:
    # One H100 held ~350 requests running: a queue of 8 ran dry between polls, while a
    # client that kept 10-21 waiting kept 352-363 running. 5 % of the batch waits.
    limiter = ReplicaLimiter(400)
    limiter.on_metrics(350, 50, 400, True)
    limiter.on_metrics(350, 50, 400, True)
    assert limiter.limit == 400 - (50 - 17.5)
    small = ReplicaLimiter(40)  # a small server keeps the floor of 8
    small.on_metrics(20, 20, 40, True)
    small.on_metrics(20, 20, 40, True)
    assert small.limit == 40 - (20 - 8)


def test_one_of_two_servers_behind_one_address_is_scaled_up_to_all_we_sent() -> None:
    # Two H100s behind one port: /metrics showed one server, half of our requests, and the
    # limit never grew ("nearly all we sent is running" never held): 6.6 pages/s of 15.6.
    limiter = ReplicaLimiter(64)
    for second in range(5):  # shorter than the window: requests on the wire, maybe
        limiter.on_metrics(32, 0, 64, True, now=float(second))
    assert limiter.limit == 64
    limiter.on_metrics(32, 0, 64, True, now=5.0)  # five seconds of half: one of two
    assert limiter.limit == 96
    limiter.on_metrics(48, 0, 96, True, now=5.25)
    assert limiter.limit == 144
    # Its queue counts double too: 2 x 12 waiting, 2 x 12 over the target of 8 each poll.
    limiter.on_metrics(60, 12, 144, True, now=5.5)
    limiter.on_metrics(60, 12, 144, True, now=5.75)
    assert limiter.limit == 144 - (24 - 8)


def test_a_short_gap_between_sent_and_seen_is_not_a_balancer() -> None:
    limiter = ReplicaLimiter(64)
    for tenth in range(40):  # 4 s of a server still taking in a burst
        limiter.on_metrics(20, 0, 64, True, now=tenth / 10)
    limiter.on_metrics(64, 0, 64, True, now=4.1)  # it caught up: the streak ends
    assert limiter.limit == 96
    for tenth in range(45):
        limiter.on_metrics(30, 0, 96, True, now=4.2 + tenth / 10)
    assert limiter.limit == 96  # a new streak, 4.4 s long: still too short


def test_a_server_reporting_nan_leaves_the_limit_a_number() -> None:
    limiter = ReplicaLimiter(64)
    for second in range(8):
        limiter.on_metrics(float("nan"), float("nan"), 64, True, now=float(second))
    assert limiter.limit == 64
