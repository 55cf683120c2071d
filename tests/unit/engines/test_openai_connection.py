"""The OpenAI-compatible client connecting to fakevllm server processes.

Readiness (warm-up, a missing model, nothing listening, DNS and TLS failures, a late or
loading server, a refused API key), a server URL without http, and keeping the API key out
of logs and errors. Serving pages once connected: test_openai.py.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from aiohttp import web

from ocrflow.engines.openai import OpenAIEngine
from ocrflow.errors import EngineAuthError, EngineUnavailable, EngineUnreachable, ModelNotServed
from tests.fakevllm.process import FAST, ServerHandle, running_server
from tests.polling import wait_until
from tests.unit.engines.openai_helpers import (
    MODEL,
    free_port,
    ready_then_infer,
    request,
    run,
    using,
)

SECRET = "sk-test-5b1f0e7c9a"


# -- readiness ---------------------------------------------------------------------------
def test_wait_ready_waits_out_the_warmup() -> None:
    with running_server(*FAST, "--warmup-s", "1.5") as warming:

        async def main() -> tuple[str, float]:
            engine = OpenAIEngine([warming.base_url], MODEL, poll_interval_s=0.1)
            with pytest.raises(EngineUnavailable) as early:
                await engine.wait_ready(0.2)
            started = time.monotonic()
            await engine.wait_ready(15)
            waited = time.monotonic() - started
            reply = await using(engine, lambda e: e.infer(request(1)))
            assert reply.finish_reason == "stop"
            return str(early.value), waited

        message, waited = run(main)
        outcomes = warming.stats()["outcomes"]
    assert "503" in message
    assert waited > 0.3
    assert outcomes.get("warming_up", 0) == 0  # no page was sent while it warmed up


def test_wait_ready_refuses_a_server_without_the_model(server: ServerHandle) -> None:
    engine = OpenAIEngine([server.base_url], "another-model")
    started = time.monotonic()
    with pytest.raises(ModelNotServed) as caught:
        run(lambda: using(engine, lambda e: e.wait_ready(600)))
    assert time.monotonic() - started < 10  # a second look, not the 600 s deadline
    message = str(caught.value)
    assert server.base_url in message
    assert "does not serve the model 'another-model'; it serves 'test-model'" in message


def test_wait_ready_stops_when_nothing_listens() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    engine = OpenAIEngine([url], MODEL)
    with pytest.raises(EngineUnreachable) as caught:
        run(lambda: using(engine, lambda e: e.wait_ready(600, unreachable_s=0.5)))
    message = str(caught.value)
    assert f"cannot reach the server for 0.5 s: {url}: connection refused" in message


def test_wait_ready_names_a_dns_failure_and_a_tls_error(server: ServerHandle) -> None:
    tls = f"https://127.0.0.1:{server.port}/v1"  # TLS spoken to a plain-HTTP server
    engine = OpenAIEngine(["http://no-such-host.invalid:8000/v1", tls], MODEL)
    with pytest.raises(EngineUnreachable) as caught:
        run(lambda: using(engine, lambda e: e.wait_ready(600, unreachable_s=0.3)))
    message = str(caught.value)
    assert message.startswith("cannot reach any server for 0.3 s: ")
    assert "http://no-such-host.invalid:8000/v1: DNS lookup failed" in message
    assert f"{tls}: TLS error" in message


def test_a_server_that_starts_late_is_waited_for() -> None:
    port = free_port()

    async def main() -> bool:
        engine = OpenAIEngine([f"http://127.0.0.1:{port}/v1"], MODEL)
        waiting = asyncio.create_task(engine.wait_ready(600, unreachable_s=8))
        await asyncio.sleep(1.0)  # refused meanwhile: within the unreachable window
        assert not waiting.done()
        with running_server(*FAST, "--port", port):
            await waiting
            reply = await using(engine, lambda e: e.infer(request(9)))
        return reply.finish_reason == "stop"

    assert run(main)


def test_a_loading_server_is_waited_for_past_the_unreachable_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """503 from /health is loading, not unreachable: only the ready timeout ends that wait.
    Progress lines (WARNING, so ``-q`` shows them) come while it lasts."""
    caplog.set_level(logging.WARNING, logger="ocrflow.engine")
    with running_server(*FAST, "--warmup-s", "2.5") as warming:
        engine = OpenAIEngine(
            [warming.base_url],
            MODEL,
            poll_interval_s=0.1,
            progress_after_s=0.3,
            progress_every_s=0.5,
        )
        run(lambda: using(engine, lambda e: e.wait_ready(60, unreachable_s=0.2)))
    notes = [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]
    assert len(notes) >= 3
    assert all(r.levelno == logging.WARNING for r in caplog.records if "waiting" in r.msg)
    assert notes[0].startswith(
        f"waiting for the server at {warming.base_url}: loading: /health answered 503 ("
    )


@pytest.mark.parametrize("key", [None, "sk-wrong-8c2d11"])
def test_a_refused_api_key_stops_at_once_and_is_never_shown(key: str | None) -> None:
    with running_server(*FAST, "--api-key", SECRET) as keyed:
        engine = OpenAIEngine([keyed.base_url], MODEL, api_key=key)
        started = time.monotonic()
        with pytest.raises(EngineAuthError) as caught:
            run(lambda: using(engine, lambda e: e.wait_ready(600)))
        waited = time.monotonic() - started
        right = OpenAIEngine([keyed.base_url], MODEL, api_key=SECRET)
        reply = run(lambda: using(right, lambda e: ready_then_infer(e, request(10))))
    message = str(caught.value)
    assert waited < 10
    assert f"the server at {keyed.base_url}" in message and "(HTTP 401)" in message
    assert ("refused the API key" if key else "wants an API key") in message
    assert SECRET not in message and (key is None or key not in message)
    assert reply.finish_reason == "stop"


def test_a_server_url_without_http_is_a_usage_error() -> None:
    from ocrflow.errors import ConfigError

    for url in ("127.0.0.1:8000/v1", "localhost:8000", "ftp://host/v1"):
        with pytest.raises(ConfigError, match="--server"):
            OpenAIEngine([url], MODEL)


# -- the API key -------------------------------------------------------------------------
async def _keyed_server(seen: list[str]) -> web.AppRunner:
    """A tiny server that records Authorization headers, answers 500s, then fails /health."""
    health_calls = 0

    async def health(_request: web.Request) -> web.Response:
        nonlocal health_calls
        health_calls += 1
        return web.Response(status=200 if health_calls == 1 else 503)

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": MODEL}]})

    async def completions(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        await request.read()
        return web.json_response({"error": {"message": "boom"}}, status=500)

    app = web.Application(client_max_size=2**24)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


def test_the_api_key_is_sent_but_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []

    async def main() -> list[str]:
        runner = await _keyed_server(seen)
        host, port = runner.addresses[0][:2]
        engine = OpenAIEngine([f"http://{host}:{port}"], MODEL, api_key=SECRET)
        errors = []
        try:
            await engine.wait_ready(5)
            for i in range(3):  # three 500s, then /health fails: drained, with a warning
                with pytest.raises(EngineUnavailable) as caught:
                    await engine.infer(request(700 + i))
                errors.append(str(caught.value) + repr(caught.value))
            drained = lambda: not engine.snapshot()[0]["healthy"]  # noqa: E731
            assert await asyncio.to_thread(wait_until, drained, 5.0)
        finally:
            await engine.aclose()
            await runner.cleanup()
        # A refused connection, too.
        dead = OpenAIEngine([f"http://127.0.0.1:{free_port()}"], MODEL, api_key=SECRET)
        with pytest.raises(EngineUnavailable) as caught:
            await using(dead, lambda e: e.infer(request(800)))
        errors.append(str(caught.value) + repr(caught.value))
        return errors

    errors = run(main)
    assert seen and all(header == f"Bearer {SECRET}" for header in seen)
    assert "drained" in caplog.text
    assert all(SECRET not in error for error in errors)
    assert SECRET not in caplog.text
