"""The readiness judge: which looks keep the wait going, which stop it, and with what words."""

from __future__ import annotations

import itertools
import logging
import socket
import ssl

import httpx
import pytest

from ocrflow.engines.readiness import ProgressNotes, Readiness, ReadyWatch, connect_cause
from ocrflow.errors import EngineAuthError, EngineUnavailable, EngineUnreachable, ModelNotServed

A = "http://a:8000/v1"
B = "http://b:8000/v1"


def watch(**fields: object) -> ReadyWatch:
    fields.setdefault("deadline_s", 900.0)
    fields.setdefault("unreachable_s", 60.0)
    return ReadyWatch("olmocr", started=0.0, **fields)  # type: ignore[arg-type]


def refused(url: str = A) -> Readiness:
    return Readiness(url, "unreachable", "connection refused")


def loading(url: str = B) -> Readiness:
    return Readiness(url, "loading", "/health answered 503")


def test_unreachable_everywhere_for_the_window_stops_with_each_cause() -> None:
    judge = watch()
    for now in (0.0, 30.0, 59.0):
        judge.judge([refused(A), refused(B)], now)
    with pytest.raises(EngineUnreachable) as caught:
        judge.judge([refused(A), refused(B)], 60.0)
    message = str(caught.value)
    assert message.startswith("cannot reach any server for 60 s: ")
    assert f"{A}: connection refused; {B}: connection refused" in message


def test_one_loading_server_keeps_the_wait_until_the_ready_timeout() -> None:
    judge = watch()
    for now in (0.0, 100.0, 500.0, 899.0):
        judge.judge([refused(A), loading(B)], now)
    with pytest.raises(EngineUnavailable) as caught:
        judge.judge([refused(A), loading(B)], 900.0)
    assert not isinstance(caught.value, EngineUnreachable)
    assert f"{B}: loading: /health answered 503" in str(caught.value)


def test_the_unreachable_window_restarts_once_a_server_answered() -> None:
    judge = watch()
    judge.judge([refused()], 0.0)
    judge.judge([loading(A)], 50.0)  # it answered: loading
    judge.judge([refused()], 55.0)  # restarting: a fresh window begins here
    judge.judge([refused()], 114.0)
    with pytest.raises(EngineUnreachable):
        judge.judge([refused()], 115.0)


def test_a_refused_key_stops_at_the_first_look() -> None:
    with pytest.raises(EngineAuthError, match=f"the server at {A} refused the API key"):
        watch(keyed=True).judge([Readiness(A, "auth", "HTTP 401"), loading()], 0.0)
    with pytest.raises(EngineAuthError, match=r"wants an API key \(HTTP 403\); pass --api-key"):
        watch().judge([Readiness(A, "auth", "HTTP 403")], 0.0)


def test_other_models_stop_on_the_second_look_in_a_row() -> None:
    other = Readiness(A, "wrong_model", served=("qwen", "llama"))
    judge = watch()
    judge.judge([other], 0.0)
    judge.judge([loading(A)], 1.0)  # a list that changes: start counting again
    judge.judge([other], 2.0)
    with pytest.raises(ModelNotServed) as caught:
        judge.judge([other], 3.0)
    assert str(caught.value).startswith(
        f"the server at {A} does not serve the model 'olmocr'; it serves 'qwen', 'llama'"
    )


def test_progress_lines_come_after_a_few_seconds_then_every_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="ocrflow.engine")
    judge = watch(notes=ProgressNotes(after_s=5.0, every_s=15.0))
    for now in range(0, 50):
        judge.judge([loading(A)], float(now))
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        f"waiting for the server at {A}: loading: /health answered 503 ({s} s)" for s in (5, 20, 35)
    ]


def test_progress_notes_timing() -> None:
    notes = ProgressNotes(after_s=5.0, every_s=15.0)
    due = [t for t in range(0, 60) if notes.due(float(t))]
    assert due == [5, 20, 35, 50]


def _chain(*errors: BaseException) -> BaseException:
    """``errors[0]`` raised from ``errors[1]`` raised from …, as httpx wraps OS errors."""
    for outer, inner in itertools.pairwise(errors):
        outer.__cause__ = inner
    return errors[0]


def test_connect_cause_reads_the_innermost_error() -> None:
    refused_ = _chain(
        httpx.ConnectError("All connection attempts failed"),
        OSError("All connection attempts failed"),
        ConnectionRefusedError(111, "Connect call failed"),
    )
    assert connect_cause(refused_) == "connection refused"
    dns = _chain(httpx.ConnectError("x"), socket.gaierror(-2, "Name or service not known"))
    assert connect_cause(dns) == "DNS lookup failed: Name or service not known"
    tls = _chain(httpx.ConnectError("x"), ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] w"))
    assert connect_cause(tls).startswith("TLS error: ")
    assert connect_cause(httpx.ConnectTimeout("timed out")) == "connection timed out"
    unreachable = _chain(httpx.ConnectError("x"), OSError(113, "No route to host"))
    assert connect_cause(unreachable) == "No route to host"
