"""What vLLM 0.32 does with a request that does not fit its context, and the fake server
doing the same: both are asked the same questions, with ``--max-model-len 256``.

Real vLLM clamps ``max_tokens`` to the room the prompt leaves (the answer ends with
finish_reason ``length``) and answers 400 only for a prompt that is too long by itself,
or for ``max_tokens`` above the whole context. ``OpenAIEngine`` must take every such 400
as fixable (``context_overflow``: the reader shrinks the image and the token budget), and
caps ``max_tokens`` at the context the server reports so that the last kind never happens.

The real server is the CPU build and a tiny random LLaVA (its images are 196 tokens, its
prompts count other than the fake's estimate): the checks compare what both servers say,
not token counts.
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from ocrflow.engines.openai import OpenAIEngine
from ocrflow.errors import EngineRejected
from ocrflow.types import EngineReply, PageImage, PageRequest
from tests.fakevllm.process import running_server
from tests.needs import TINY_VLM, VLLM_VENV, need_vllm

CONTEXT = 256
MODEL = "tiny"
CPU_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
#: vLLM 0.32's exact words (``renderers/params.py``, ``serve/utils/api_utils.py``).
TOO_MUCH_OUTPUT = (
    "max_tokens=300 cannot be greater than max_model_len=256. Please request fewer output "
    "tokens. (parameter=max_tokens, value=300)"
)
TEXT_TOO_LONG = (
    "This model's maximum context length is 256 tokens. However, your prompt contains at "
    "least 257 input tokens, which exceeds this limit even without any output tokens. "
    "Please reduce the length of the input prompt. (parameter=input_tokens, value=257)"
)
IMAGE_TOO_LONG = re.compile(
    r"Input length \((\d+)\) exceeds model's maximum context length \(256\)\."
)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, deadline_s: float) -> None:
    """Until /health is 200 and /v1/models lists the model; fail with the log tail."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"vllm serve exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url.removesuffix("/v1") + "/health", timeout=2).status_code == 200:
                models = httpx.get(url + "/models", timeout=5).json()
                if [m["id"] for m in models["data"]] == [MODEL]:
                    return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    pytest.fail(f"vllm serve not ready in {deadline_s} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def real_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``vllm serve`` (CPU build, tiny model) with a 256-token context, for the module."""
    need_vllm()
    port = free_port()
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    argv = [
        str(VLLM_VENV / "bin" / "vllm"), "serve", str(TINY_VLM), "--served-model-name", MODEL,
        "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
        "--max-model-len", str(CONTEXT), "--limit-mm-per-prompt", '{"video": 0}',
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **CPU_ENV},
            start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_ready(url, proc, log, 450)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture(scope="module")
def fake_vllm() -> Iterator[str]:
    """The fake server with the same context (and pages longer than any room left)."""
    flags = ("--model", MODEL, "--max-model-len", CONTEXT, "--tokens-per-page", "1000")
    with running_server(*flags, "--pages-per-s", "200") as server:
        yield server.base_url


@pytest.fixture(
    scope="module",
    params=["fake", pytest.param("real", marks=[pytest.mark.vllm, pytest.mark.slow])],
)
def server(request: pytest.FixtureRequest) -> str:
    """The base URL of the fake or the real server."""
    return str(request.getfixturevalue(f"{request.param}_vllm"))


def png(width: int, height: int, *, noise: bool = False) -> bytes:
    """A PNG page: white, or random noise (which PNG cannot compress: a large payload)."""
    if noise:
        pixels = random.Random(7).randbytes(width * height * 3)
        image = Image.frombytes("RGB", (width, height), pixels)
    else:
        image = Image.new("RGB", (width, height), "white")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def chat(url: str, text: str, max_tokens: int, image: bytes | None = None) -> httpx.Response:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if image is not None:
        data = base64.b64encode(image).decode()
        content.insert(
            0, {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
        )
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "ignore_eos": True,  # the random model must not stop early: the budget is the test
    }
    return httpx.post(url + "/chat/completions", json=body, timeout=120)


def error(reply: httpx.Response) -> tuple[str, str | None]:
    assert reply.status_code == 400, reply.text
    err = reply.json()["error"]
    assert err["type"] == "BadRequestError" and err["code"] == 400
    return err["message"], err["param"]


def page_request(image: bytes, max_tokens: int, prompt: str = "Convert the page.") -> PageRequest:
    with Image.open(io.BytesIO(image)) as opened:
        width, height = opened.size
    return PageRequest(
        image=PageImage(image, width, height, "png"),
        prompt=prompt,
        temperature=0.0,
        max_tokens=max_tokens,
        image_first=True,
        extra_body={"ignore_eos": True},
    )


def infer(url: str, request: PageRequest, *, ready: bool) -> EngineReply:
    """One request through ``OpenAIEngine`` (after ``wait_ready`` when ``ready``)."""

    async def go() -> EngineReply:
        engine = OpenAIEngine([url], MODEL)
        try:
            if ready:
                await engine.wait_ready(30)
            return await engine.infer(request)
        finally:
            await engine.aclose()

    return asyncio.run(go())


# -- what the server says ------------------------------------------------------------------
def test_a_prompt_that_fits_has_max_tokens_clamped_to_the_room_left(server: str) -> None:
    reply = chat(server, "Convert the page.", CONTEXT, png(96, 64))
    assert reply.status_code == 200, reply.text
    data = reply.json()
    assert data["choices"][0]["finish_reason"] == "length"
    usage = data["usage"]
    assert usage["prompt_tokens"] + usage["completion_tokens"] == CONTEXT
    assert usage["completion_tokens"] < CONTEXT


def test_more_output_than_the_whole_context_is_a_400(server: str) -> None:
    assert error(chat(server, "Convert the page.", 300, png(96, 64))) == (
        TOO_MUCH_OUTPUT,
        "max_tokens",
    )


def test_a_text_too_long_by_itself_is_a_400(server: str) -> None:
    assert error(chat(server, "x " * 600, 10, png(96, 64))) == (TEXT_TOO_LONG, "input_tokens")


def test_an_image_that_makes_the_prompt_too_long_is_a_400(server: str) -> None:
    # Real: 196 image tokens + 60 characters; fake: a large (noise) payload.
    message, param = error(chat(server, "x" * 60, 10, png(300, 300, noise=True)))
    match = IMAGE_TOO_LONG.fullmatch(message)
    assert match and int(match.group(1)) > CONTEXT, message
    assert param is None


# -- what the client makes of it -------------------------------------------------------------
def test_the_client_takes_a_clamped_answer_as_cut_by_length(server: str) -> None:
    reply = infer(server, page_request(png(96, 64), CONTEXT), ready=True)
    assert reply.finish_reason == "length"
    assert reply.tokens_in + reply.tokens_out == CONTEXT


def test_the_client_caps_max_tokens_at_the_reported_context(server: str) -> None:
    with pytest.raises(EngineRejected) as caught:  # before readiness it cannot know
        infer(server, page_request(png(96, 64), 300), ready=False)
    assert caught.value.context_overflow and "max_model_len=256" in str(caught.value)
    reply = infer(server, page_request(png(96, 64), 300), ready=True)
    assert reply.finish_reason == "length"


@pytest.mark.parametrize(
    ("prompt", "noise"), [("x " * 600, False), ("x" * 60, True)], ids=["text", "image"]
)
def test_every_too_long_prompt_is_a_fixable_context_overflow(
    server: str, prompt: str, noise: bool
) -> None:
    image = png(300, 300, noise=True) if noise else png(96, 64)
    with pytest.raises(EngineRejected) as caught:
        infer(server, page_request(image, 10, prompt), ready=True)
    assert caught.value.status == 400
    assert caught.value.context_overflow, str(caught.value)


# -- the fake server alone -------------------------------------------------------------------
def test_fake_a_prompt_of_exactly_the_context_leaves_no_room(fake_vllm: str) -> None:
    # Real vLLM 0.32 answers so when the prompt takes all 256 tokens (its budget clamps to 0).
    message, param = error(chat(fake_vllm, "x" * 4 * CONTEXT, 10))
    assert (message, param) == (
        "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)",
        "max_tokens",
    )
    with pytest.raises(EngineRejected) as caught:
        infer(fake_vllm, page_request(png(8, 8), 10, "x" * (4 * CONTEXT - 4)), ready=True)
    assert caught.value.context_overflow, str(caught.value)


def test_fake_strict_context_check_refuses_what_does_not_fit_with_its_output() -> None:
    flags = ("--model", MODEL, "--max-model-len", CONTEXT, "--context-check", "strict")
    with running_server(*flags) as strict:
        message, _param = error(chat(strict.base_url, "Convert the page.", CONTEXT, png(96, 64)))
    assert message.startswith("This model's maximum context length is 256 tokens. However, you ")
