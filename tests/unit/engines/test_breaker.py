"""The circuit breaker of one server, on a clock the tests move by hand."""

from __future__ import annotations

import logging

import pytest

from ocrflow.engines.breaker import BreakerPolicy, CircuitBreaker, all_failing, failing_message

POLICY = BreakerPolicy(failures=3, window_s=10.0, probe_every_s=5.0, fail_after_s=60.0)
URL = "http://gpu1:8000/v1"


def failing(breaker: CircuitBreaker, times: list[float], cause: str = "HTTP 500: boom") -> None:
    for now in times:
        breaker.failed(cause, now)


def test_it_opens_after_enough_failures_over_the_window(caplog: pytest.LogCaptureFixture) -> None:
    breaker = CircuitBreaker(URL, POLICY)
    with caplog.at_level(logging.WARNING, logger="ocrflow.engine"):
        failing(breaker, [100.0, 101.0, 102.0, 105.0])
        assert not breaker.is_open  # three in a row, but over 5 s only
        failing(breaker, [110.0])
        assert breaker.is_open
        failing(breaker, [111.0, 112.0])  # more failures: no second line
    lines = [r.getMessage() for r in caplog.records if "is failing" in r.getMessage()]
    assert len(lines) == 1
    assert URL in lines[0] and "HTTP 500: boom" in lines[0] and "5 requests in a row" in lines[0]


def test_a_long_stretch_of_few_failures_does_not_open_it() -> None:
    breaker = CircuitBreaker(URL, POLICY)
    failing(breaker, [0.0, 20.0])  # old enough, but only two
    assert not breaker.is_open
    breaker.succeeded(21.0)
    failing(breaker, [22.0, 23.0, 33.0])  # the streak began again at 22 s
    assert breaker.is_open


def test_a_success_closes_it_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    breaker = CircuitBreaker(URL, POLICY)
    failing(breaker, [0.0, 5.0, 10.0])
    assert breaker.is_open and breaker.failing_for(40.0) == 40.0
    with caplog.at_level(logging.WARNING, logger="ocrflow.engine"):
        breaker.succeeded(41.0)
    assert not breaker.is_open and breaker.streak == 0 and breaker.failing_for(50.0) == 0.0
    assert f"server {URL} answers again (it failed for 41 s)" in caplog.text


def test_while_open_one_probe_goes_every_interval() -> None:
    breaker = CircuitBreaker(URL, POLICY)
    assert breaker.allows(0.0)  # closed: everything goes
    failing(breaker, [0.0, 5.0, 10.0])  # opens at 10 s
    assert not breaker.allows(12.0)  # too soon after opening
    assert breaker.allows(15.0)  # the probe
    assert not breaker.allows(15.5)  # one at a time
    breaker.failed("HTTP 500: boom", 16.0)  # the probe failed
    assert not breaker.allows(19.0)
    assert breaker.allows(20.0)
    breaker.probe_ended()  # cancelled without an answer
    assert not breaker.allows(21.0)  # the next one waits for its time
    assert breaker.allows(25.0)
    breaker.succeeded(25.5)
    assert breaker.allows(25.6) and breaker.allows(25.7)


def test_a_failed_health_check_opens_it_at_once_and_health_back_probes_soon() -> None:
    breaker = CircuitBreaker(URL, POLICY)
    breaker.trip("health check failed: /health answered 503", 7.0)
    assert breaker.is_open and breaker.cause.startswith("health check failed")
    assert not breaker.allows(8.0)
    breaker.probe_soon()
    assert breaker.allows(8.5)


def test_the_run_gives_up_only_when_every_server_failed_long_enough() -> None:
    one, two = CircuitBreaker(URL, POLICY), CircuitBreaker("http://gpu2:8000/v1", POLICY)
    failing(one, [0.0, 5.0, 10.0])
    assert not all_failing([one, two], 100.0)  # the second one still answers
    failing(two, [30.0, 35.0, 40.0], cause="HTTP 200 with a body that is not JSON")
    assert not all_failing([one, two], 80.0)  # the second fails for 50 s only
    assert all_failing([one, two], 90.0)
    message = failing_message([one, two], 90.0)
    assert "for 60 s" in message and "HTTP 500: boom" in message and "not JSON" in message
    assert URL in message and "run the same command again" in message


def test_fail_after_zero_never_gives_up() -> None:
    breaker = CircuitBreaker(URL, BreakerPolicy(failures=1, window_s=0.0, fail_after_s=0.0))
    breaker.failed("HTTP 500", 0.0)
    assert breaker.is_open
    assert not all_failing([breaker], 10_000.0)
    assert not all_failing([], 10.0)
