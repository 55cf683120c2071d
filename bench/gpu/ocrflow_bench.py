"""``ocrflow`` exactly as users run it, with the olmOCR recipe made fit for random weights.

Run: ``python bench/gpu/ocrflow_bench.py run PDFS -o OUT --engine openai ...`` (the same
arguments as ``ocrflow``). Two things differ from the real CLI, both for a model loaded with
``--load-format dummy`` (random weights, which never stop and never write front matter):

- each request asks for ``ignore_eos: true``, so every page decodes exactly ``max_tokens``;
- the reply is accepted as it is (``finish_reason`` length, no front matter): one request a
  page, no retries, as a trained model that follows its format would take.

Everything else is ocrflow's own: render workers, workspace, adaptive concurrency, outputs.
With ``OCRFLOW_BENCH_READY=FILE`` the URL of a managed vLLM replica and the moment it
answered (``time.time()``) are appended to FILE as JSON lines, so the benchmark can poll
its ``/metrics`` and time the pages after start-up.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass
from types import MappingProxyType

from ocrflow.recipes import registry
from ocrflow.recipes.base import ParsedPage
from ocrflow.recipes.olmocr import OlmocrRecipe
from ocrflow.types import EngineReply, PageImage, PageRequest


@dataclass(frozen=True, slots=True)
class FixedLengthOlmocr(OlmocrRecipe):
    """olmOCR's requests plus ``ignore_eos``; any reply accepted as the page's text."""

    def build_request(
        self, image: PageImage, attempt: int, *, max_tokens: int | None = None, page_key: str = ""
    ) -> PageRequest:
        """The olmOCR request of this attempt, told to decode all of ``max_tokens``."""
        request = OlmocrRecipe.build_request(
            self, image, attempt, max_tokens=max_tokens, page_key=page_key
        )
        return dataclasses.replace(request, extra_body={**request.extra_body, "ignore_eos": True})

    def parse(self, reply: EngineReply) -> ParsedPage:
        """The reply's text as the page's Markdown (random weights write no front matter)."""
        return ParsedPage(reply.text)


def _install() -> None:
    """Serve ``--recipe olmocr`` with the fixed-length recipe; note managed replicas' URLs."""
    recipes = dict(registry.RECIPES)
    recipes["olmocr"] = FixedLengthOlmocr
    registry.RECIPES = MappingProxyType(recipes)
    ready_file = os.environ.get("OCRFLOW_BENCH_READY")
    if not ready_file:
        return
    from ocrflow.engines.server_process import ManagedServer

    original = ManagedServer.wait_ready

    async def wait_ready(self: ManagedServer, client: object) -> None:
        await original(self, client)  # type: ignore[arg-type]
        with open(ready_file, "a", encoding="utf-8") as out:
            out.write(json.dumps({"url": self.url, "ready": time.time()}) + "\n")

    ManagedServer.wait_ready = wait_ready  # type: ignore[method-assign]


if __name__ == "__main__":
    _install()
    from ocrflow.cli import main

    main()
