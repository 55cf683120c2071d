"""The reader against a server that behaves like vLLM 0.32 at the edge of its context.

vLLM clamps ``max_tokens`` to the room the prompt leaves: a page longer than that room
comes back cut (finish_reason ``length``), a content failure that climbs the recipe's
temperature ladder as any cut reply does. A prompt too long by itself (a large image) is
a 400: the reader shrinks the image and asks again, and the smaller page fits.
(``test_vllm_context.py`` checks the fake server's answers against real vLLM.)
"""

from __future__ import annotations

import asyncio
import base64
import io
import math
import random
from pathlib import Path

from PIL import Image

from ocrflow.engines.openai import OpenAIEngine
from ocrflow.readers.policy import AttemptPolicy, TransportPolicy
from ocrflow.readers.vlm import VlmReader
from ocrflow.recipes.olmocr import TEMPERATURES, OlmocrRecipe
from ocrflow.render.jobs import RenderedPage
from ocrflow.types import PageImage, PageKey, PageResult, Route
from tests.fakevllm.process import ServerHandle, running_server
from tests.fakevllm.server import B64_BYTES_PER_IMAGE_TOKEN

MODEL = "olmocr"
FLAGS = ("--model", MODEL, "--reply-format", "olmocr", "--pages-per-s", "2000")


def noise_png(width: int, height: int) -> PageImage:
    """A page PNG cannot compress: its payload (and the server's token count) is large."""
    pixels = random.Random(3).randbytes(width * height * 3)
    buffer = io.BytesIO()
    Image.frombytes("RGB", (width, height), pixels).save(buffer, format="PNG")
    return PageImage(buffer.getvalue(), width, height, "png")


def image_tokens(image: PageImage) -> int:
    """The fake server's estimate of an image's tokens."""
    return math.ceil(len(base64.b64encode(image.data)) / B64_BYTES_PER_IMAGE_TOKEN)


def read(server: ServerHandle, image: PageImage, tmp_path: Path) -> PageResult:
    """One page through ``OpenAIEngine`` and the olmOCR recipe, as a run reads it."""

    async def go() -> PageResult:
        engine = OpenAIEngine([server.base_url], MODEL)
        reader = VlmReader(
            engine,
            OlmocrRecipe(),
            transport=TransportPolicy(base_s=0.01, cap_s=0.05, page_deadline_s=60),
            attempts=AttemptPolicy(),
            seed=1,
        )
        try:
            await engine.wait_ready(10)
            return await reader.read(RenderedPage(1, image=image), PageKey("doc", 1))
        finally:
            await reader.aclose()
            await engine.aclose()

    return asyncio.run(go())


def test_a_reply_clamped_by_the_context_is_a_content_failure(tmp_path: Path) -> None:
    image = noise_png(200, 260)
    # Room for ~150 output tokens after the prompt; a page needs 1000.
    context = image_tokens(image) + 300
    flags = (*FLAGS, "--max-model-len", context, "--tokens-per-page", "1000")
    with running_server(*flags) as server:
        result = read(server, image, tmp_path)
        outcomes = server.stats()["outcomes"]
    assert result.route is Route.FALLBACK
    assert result.attempts == len(TEMPERATURES)  # every temperature tried, as for any cut reply
    assert outcomes == {"length": len(TEMPERATURES)}  # no 400: vLLM clamps, never refuses


def test_an_image_too_long_for_the_context_is_shrunk_and_read(tmp_path: Path) -> None:
    image = noise_png(800, 1000)
    # The prompt's text is ~80 tokens: the full image overflows, one 0.7x shrink fits.
    context = image_tokens(image) - 50
    with running_server(*FLAGS, "--max-model-len", context) as server:
        result = read(server, image, tmp_path)
        outcomes = server.stats()["outcomes"]
    assert result.route is Route.ENGINE, result.error
    assert result.attributes["shrinks"] == 1
    assert result.attempts == 1  # a shrink is not a content failure
    assert outcomes == {"context_overflow": 1, "stop": 1}
