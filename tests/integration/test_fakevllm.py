"""Tests of the fakevllm test server itself, run as a real subprocess."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.fakevllm.engine import Capacity, Engine
from tests.fakevllm.process import FAST, ServerHandle, ServerStartError, running_server
from tests.fakevllm.server import EXCLUSIVE_FAULTS
from tests.polling import wait_until

#: a fast engine for functional tests: 20-token pages, sub-millisecond steps
VLLM_METRICS = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:request_success_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
)


def image_url(i: int, size: int = 3000) -> tuple[str, str]:
    """A data URL with a distinct base64 payload, and the page tag the server derives."""
    payload = base64.b64encode(hashlib.sha256(str(i).encode()).digest() * (size // 32)).decode()
    tag = "page-" + hashlib.sha1(payload.encode()).hexdigest()[:12]
    return f"data:image/png;base64,{payload}", tag


def chat_body(i: int = 0, **extra: Any) -> dict[str, Any]:
    """An olmOCR-like request: text part, then the image part."""
    url, _tag = image_url(i)
    content = [
        {"type": "text", "text": "Convert this page to Markdown."},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    body: dict[str, Any] = {
        "model": "test-model",
        "messages": [{"role": "user", "content": content}],
        "temperature": 0.1,
    }
    body.update(extra)
    return body


def post(server: ServerHandle, body: Any, timeout: float = 5.0) -> httpx.Response:
    """POST a chat completion (a fresh connection each time)."""
    return httpx.post(server.base_url + "/chat/completions", json=body, timeout=timeout)


async def burst(server: ServerHandle, n: int, **extra: Any) -> list[httpx.Response]:
    """``n`` concurrent completions with distinct images."""
    limits = httpx.Limits(max_connections=n)
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30, limits=limits) as client:
        calls = [client.post("/chat/completions", json=chat_body(i, **extra)) for i in range(n)]
        return await asyncio.gather(*calls)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    """One fast server shared by the functional and fault tests of this module."""
    ready = tmp_path_factory.mktemp("fakevllm") / "ready"
    with running_server(*FAST, "--max-model-len", "4096", "--ready-file", ready) as handle:
        handle.ready_path = ready  # type: ignore[attr-defined]
        yield handle


@pytest.fixture
def faults(server: ServerHandle) -> Iterator[Callable[..., dict[str, float]]]:
    """Set fault rates on the shared server for one test; reset them afterwards."""
    yield server.set_faults
    server.set_faults(**dict.fromkeys((*EXCLUSIVE_FAULTS, "slow"), 0.0))


# ----------------------------------------------------------------- formats and basics
def test_models_health_and_ready_file(server: ServerHandle) -> None:
    models = httpx.get(server.base_url + "/models", timeout=5).json()
    assert models["object"] == "list"
    assert models["data"][0]["id"] == "test-model"
    assert models["data"][0]["max_model_len"] == 4096
    health = httpx.get(server.url + "/health", timeout=5)
    assert health.status_code == 200 and health.content == b""
    assert server.ready_path.read_text().strip() == server.url  # type: ignore[attr-defined]


def test_completion_names_its_image_and_temperature(server: ServerHandle) -> None:
    _url, tag = image_url(101)
    before = server.stats()["images"].get(tag, 0)
    for _ in range(2):
        reply = post(server, chat_body(101, temperature=0.3))
        assert reply.status_code == 200
    data = reply.json()
    choice = data["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert data["object"] == "chat.completion" and data["model"] == "test-model"
    assert choice["message"]["content"].startswith(f"# Page {tag}\n\n")
    assert choice["message"]["content"].endswith("(temperature 0.3)")
    usage = data["usage"]
    assert usage["completion_tokens"] == 20
    assert usage["total_tokens"] == usage["prompt_tokens"] + 20 and usage["prompt_tokens"] > 0
    assert server.stats()["images"][tag] == before + 2


def test_metrics_use_vllm_names(server: ServerHandle) -> None:
    post(server, chat_body(102))
    text = server.metrics()
    for name in VLLM_METRICS:
        assert f'{name}{{engine="0",model_name="test-model"' in text, name
    stop_line = next(line for line in text.splitlines() if 'finished_reason="stop"' in line)
    assert float(stop_line.rsplit(" ", 1)[1]) >= 1
    generated = next(line for line in text.splitlines() if line.startswith("vllm:generation_"))
    assert float(generated.rsplit(" ", 1)[1]) >= 20


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"model": "test-model"}, 400),
        ({"messages": "hi"}, 400),
        ({"messages": [{"role": "user", "content": [{"type": "video"}]}]}, 400),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            400,
        ),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": "ten"}, 400),
        ({"model": "other-model", "messages": [{"role": "user", "content": "x"}]}, 404),
    ],
)
def test_malformed_requests_get_openai_errors(server: ServerHandle, body: Any, status: int) -> None:
    reply = post(server, body)
    assert reply.status_code == status
    error = reply.json()["error"]
    assert error["code"] == status and error["message"]


def test_invalid_json_is_400(server: ServerHandle) -> None:
    reply = httpx.post(server.base_url + "/chat/completions", content=b"{not json", timeout=5)
    assert reply.status_code == 400


def test_context_overflow_uses_vllm_wording(server: ServerHandle) -> None:
    # vLLM 0.32: more output than the whole context is refused; a prompt that fits has its
    # max_tokens clamped (tests/integration/test_vllm_context.py checks both against vLLM).
    reply = post(server, chat_body(103, max_tokens=5000))
    assert reply.status_code == 400
    message = reply.json()["error"]["message"]
    assert message.startswith("max_tokens=5000 cannot be greater than max_model_len=4096.")
    long_text = {"role": "user", "content": "x" * 4 * 4100}
    reply = post(server, chat_body(103) | {"messages": [long_text]})
    assert reply.status_code == 400
    message = reply.json()["error"]["message"]
    assert message.startswith("This model's maximum context length is 4096 tokens. However, ")


def test_small_max_tokens_stops_for_length(server: ServerHandle) -> None:
    data = post(server, chat_body(104, max_tokens=5)).json()
    assert data["choices"][0]["finish_reason"] == "length"
    assert data["usage"]["completion_tokens"] == 5


def test_streaming(server: ServerHandle) -> None:
    _url, tag = image_url(105)
    body = chat_body(105, stream=True, stream_options={"include_usage": True})
    reply = post(server, body)
    events = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert tag in text
    assert chunks[-1]["usage"]["completion_tokens"] == 20


@pytest.mark.parametrize("fmt", ["olmocr", "deepseek"])
def test_reply_formats(fmt: str) -> None:
    _url, tag = image_url(106)
    with running_server(*FAST, "--reply-format", fmt) as srv:
        content = post(srv, chat_body(106)).json()["choices"][0]["message"]["content"]
    assert tag in content
    if fmt == "olmocr":
        assert content.startswith("---\nprimary_language: en\nis_rotation_valid: true\n")
        assert "\nis_diagram: false\n---\n" in content
    else:
        assert content.startswith("<|ref|>title<|/ref|><|det|>[[")
        assert "<|ref|>image<|/ref|><|det|>[[" in content


# ----------------------------------------------------------------- faults at probability 1
@pytest.mark.parametrize(
    ("fault", "status", "text"),
    [
        ("fail_500", 500, "Internal server error"),
        ("fail_503", 503, "Service unavailable"),
        ("fail_429", 429, "Too many requests"),
        ("context_overflow", 400, "maximum context length is 4096 tokens"),
    ],
)
def test_error_faults(
    server: ServerHandle, faults: Any, fault: str, status: int, text: str
) -> None:
    faults(**{fault: 1.0}, retry_after_s=3)
    reply = post(server, chat_body(201))
    assert reply.status_code == status
    assert text in reply.json()["error"]["message"]
    if fault == "fail_429":
        assert reply.headers["Retry-After"] == "3"
    assert server.stats()["outcomes"][fault] >= 1


def test_truncate_fault_cuts_the_body(server: ServerHandle, faults: Any) -> None:
    faults(truncate=1.0)
    with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
        post(server, chat_body(202))


def test_drop_fault_closes_without_answer(server: ServerHandle, faults: Any) -> None:
    faults(drop=1.0)
    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        post(server, chat_body(203))


def test_length_fault(server: ServerHandle, faults: Any) -> None:
    faults(length=1.0)
    data = post(server, chat_body(204, max_tokens=3000)).json()
    assert data["choices"][0]["finish_reason"] == "length"
    assert data["usage"]["completion_tokens"] == 3000
    assert "the table of the" in data["choices"][0]["message"]["content"]
    assert server.stats()["outcomes"]["length_fault"] >= 1


def test_garbage_fault(server: ServerHandle, faults: Any) -> None:
    faults(garbage=1.0)
    data = post(server, chat_body(205)).json()
    assert data["choices"][0]["finish_reason"] == "stop"
    assert "# Page page-" not in data["choices"][0]["message"]["content"]


def test_slow_fault(server: ServerHandle, faults: Any) -> None:
    faults(slow=1.0, slow_s=0.4)
    start = time.monotonic()
    assert post(server, chat_body(206)).status_code == 200
    assert time.monotonic() - start >= 0.4


def test_hang_fault_ends_when_client_gives_up(server: ServerHandle, faults: Any) -> None:
    faults(hang=1.0)
    with pytest.raises(httpx.ReadTimeout):
        post(server, chat_body(207), timeout=0.3)
    assert wait_until(lambda: server.stats()["hanging"] == 0), "a hung handler leaked"
    assert server.stats()["outcomes"]["hang"] >= 1


def test_admin_rejects_unknown_fault(server: ServerHandle) -> None:
    reply = httpx.post(server.url + "/admin/faults", json={"nope": 1}, timeout=5)
    assert reply.status_code == 400


def test_faults_are_reproducible_with_a_seed() -> None:
    patterns = []
    for _ in range(2):
        with running_server(*FAST, "--fail-500", "0.5", "--seed", "7") as srv:
            patterns.append([post(srv, chat_body(300 + i)).status_code for i in range(12)])
    assert patterns[0] == patterns[1]
    assert set(patterns[0]) == {200, 500}


# ----------------------------------------------------------------- capacity model
def test_engine_steps_are_arithmetic() -> None:
    """In process: 10 sequences of 5 tokens with room for 4 take 3 waves of 5 steps."""

    async def scenario() -> tuple[int, float, int]:
        engine = Engine(Capacity(4, 0.002, 0.001), kv_cache_tokens=1000)
        engine.start()
        seqs = [engine.submit(5, 10) for _ in range(10)]
        await asyncio.gather(*(s.future for s in seqs))
        await engine.stop()
        return engine.step, engine.busy_s, engine.generation_tokens

    steps, busy, tokens = asyncio.run(scenario())
    assert steps == 15 and tokens == 50
    assert busy == pytest.approx(10 * 0.006 + 5 * 0.004)


def test_capacity_of_a_full_batch() -> None:
    """32 requests at 20 pages/s with 32 slots and 10-token pages: 10 steps of 0.16 s."""
    with running_server(
        "--pages-per-s", "20", "--tokens-per-page", "10", "--max-num-seqs", "32"
    ) as srv:
        start = time.monotonic()
        replies = asyncio.run(burst(srv, 32))
        elapsed = time.monotonic() - start
        engine = srv.stats()["engine"]
    assert {r.status_code for r in replies} == {200}
    assert 10 <= engine["steps"] <= 14, engine
    assert engine["max_running_seen"] == 32 and engine["generation_tokens"] == 320
    assert 0.5 * 1.6 <= elapsed <= 3 * 1.6


def test_requests_beyond_max_num_seqs_wait() -> None:
    flags = ("--max-num-seqs", "4", "--tokens-per-page", "10", "--step-base-ms", "20")
    with running_server(*flags) as srv:
        seen: dict[str, float] = {}

        def watch() -> None:
            while srv.stats()["received"] < 12:
                time.sleep(0.01)
            for line in srv.metrics().splitlines():
                if line.startswith(("vllm:num_requests_waiting{", "vllm:num_requests_running{")):
                    seen[line.split("{")[0]] = float(line.rsplit(" ", 1)[1])

        watcher = threading.Thread(target=watch)
        watcher.start()
        replies = asyncio.run(burst(srv, 12))
        watcher.join(10)
        engine = srv.stats()["engine"]
    assert {r.status_code for r in replies} == {200}
    assert seen["vllm:num_requests_running"] == 4
    assert seen["vllm:num_requests_waiting"] >= 4
    assert engine["max_running_seen"] == 4
    assert 30 <= engine["steps"] <= 36, engine


# ----------------------------------------------------------------- life cycle
def test_client_abort_frees_the_slot_and_dead_after() -> None:
    """Abort a running sequence; then the engine dies on request 3 of ``--dead-after 2``."""
    flags = ("--dead-after", "2", "--tokens-per-page", "100", "--step-base-ms", "20")
    with running_server(*flags) as srv:
        with pytest.raises(httpx.ReadTimeout):
            post(srv, chat_body(401), timeout=0.3)
        assert wait_until(lambda: srv.stats()["outcomes"].get("aborted") == 1)
        assert srv.stats()["engine"]["running"] == 0

        in_flight: list[httpx.Response] = []
        thread = threading.Thread(target=lambda: in_flight.append(post(srv, chat_body(402))))
        thread.start()
        assert wait_until(lambda: srv.stats()["engine"]["running"] == 1)
        third = post(srv, chat_body(403))
        thread.join(5)
        assert third.status_code == 500 and "EngineCore" in third.json()["error"]["message"]
        assert in_flight[0].status_code == 500
        assert httpx.get(srv.url + "/health", timeout=5).status_code == 503
        assert srv.alive()


def test_die_after_kills_the_process() -> None:
    with running_server(*FAST, "--die-after", "1") as srv:
        assert post(srv, chat_body(501)).status_code == 200
        with pytest.raises(httpx.TransportError):
            post(srv, chat_body(502))
        assert srv.proc.wait(5) == 1


def test_warmup_window() -> None:
    with running_server(*FAST, "--warmup-s", "1.0") as srv:
        assert httpx.get(srv.base_url + "/models", timeout=5).status_code == 200
        assert httpx.get(srv.url + "/health", timeout=5).status_code == 503
        assert post(srv, chat_body(601)).status_code == 503
        assert wait_until(lambda: httpx.get(srv.url + "/health", timeout=5).status_code == 200)
        assert post(srv, chat_body(602)).status_code == 200


def test_running_server_reports_start_failure() -> None:
    with (
        pytest.raises(ServerStartError, match="unrecognized arguments"),
        running_server("--no-such-flag"),
    ):
        pass
