"""What one fake server knows: its start-up config, its fault settings and its counters.

``ServerConfig`` is fixed when the process starts (``server.config_from_args``); ``Faults``
changes at run time through ``/admin/faults``; ``ServerState`` holds both with the engine,
the fault draws' random generator and the ``/stats`` counters. Handlers find it on the
aiohttp application under ``STATE``.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakevllm.engine import Capacity, Engine
from tests.fakevllm.replies import FIGURE_MARKER

#: faults that exclude each other, in the order they are drawn
EXCLUSIVE_FAULTS = (
    "drop",
    "hang",
    "fail_500",
    "fail_503",
    "fail_429",
    "context_overflow",
    "truncate",
    "length",
    "garbage",
    "null_content",
    "empty_content",
    "no_choices",
    "invalid_json",
)


@dataclass
class Faults:
    """Fault probabilities and parameters; changeable at run time via ``/admin/faults``."""

    drop: float = 0.0
    hang: float = 0.0
    fail_500: float = 0.0
    fail_503: float = 0.0
    fail_429: float = 0.0
    context_overflow: float = 0.0
    truncate: float = 0.0
    length: float = 0.0
    garbage: float = 0.0
    null_content: float = 0.0
    empty_content: float = 0.0
    no_choices: float = 0.0
    invalid_json: float = 0.0
    slow: float = 0.0
    slow_s: float = 2.0
    hang_s: float = 3600.0
    retry_after_s: float = 1.0

    def update(self, changes: dict[str, Any]) -> None:
        """Apply ``{name: number}`` changes; unknown names or non-numbers raise ValueError."""
        names = {f.name for f in dataclasses.fields(self)}
        for key, value in changes.items():
            name = key.replace("-", "_")
            if name not in names or isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"bad fault setting {key!r}={value!r}")
            setattr(self, name, float(value))


@dataclass(frozen=True)
class ServerConfig:
    """Everything fixed at start-up."""

    host: str = "127.0.0.1"
    port: int = 0
    model: str = "test-model"
    capacity: Capacity = field(default_factory=lambda: Capacity(128, 0.064, 0.0005))
    tokens_per_page: int = 100
    tokens_jitter: float = 0.0
    max_model_len: int = 16384
    kv_cache_tokens: int = 128 * 4096
    reply_format: str = "markdown"
    seed: int = 0
    die_after: int | None = None
    dead_after: int | None = None
    warmup_s: float = 0.0
    ready_file: str | None = None
    #: Share the port with other servers (SO_REUSEPORT, as vLLM binds): the kernel spreads
    #: connections over them, like a load balancer in front of several replicas.
    reuse_port: bool = False
    #: Print ``STATS {json}`` (the ``/stats`` counters) on stdout when stopped: a server
    #: that ocrflow starts and stops itself leaves its counters in its log.
    stats_on_exit: bool = False
    #: "clamp" (vLLM 0.32) or "strict" (older servers); see the module docstring.
    context_check: str = "clamp"
    api_key: str | None = None
    #: DeepSeek replies: ``image`` regions (figure boxes) per page.
    figures_per_page: int = 1
    #: A request whose text holds this is a figure request (see ``replies.figure_text``).
    figure_marker: str = FIGURE_MARKER
    #: DeepSeek region second passes: "Free OCR." gets ``region_text``; an image 1280 px
    #: long gets a grounding reply with a ``table`` region (see the module docstring).
    second_pass_replies: bool = False
    #: Page replies open with the request's prompt text (a model echoing its prompt).
    echo_prompt: bool = False


@dataclass
class ServerState:
    """All mutable state of one server process."""

    config: ServerConfig
    faults: Faults
    engine: Engine
    rng: random.Random
    started: float = field(default_factory=time.monotonic)
    received: int = 0
    hanging: int = 0
    prompt_tokens_total: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    finish_reasons: Counter[str] = field(default_factory=Counter)
    images: Counter[str] = field(default_factory=Counter)
    #: Figure requests by the figure's image tag (``images`` counts them too).
    figures: Counter[str] = field(default_factory=Counter)

    def warming(self) -> bool:
        """True during the ``--warmup-s`` window after start-up."""
        return time.monotonic() - self.started < self.config.warmup_s

    def draw_fault(self) -> str | None:
        """The exclusive fault this request gets, if any (first hit in order wins)."""
        for name in EXCLUSIVE_FAULTS:
            p = getattr(self.faults, name)
            if p > 0 and self.rng.random() < p:
                return name
        return None

    def draw_slow(self) -> bool:
        """Whether this request is delayed by ``slow_s``."""
        return self.faults.slow > 0 and self.rng.random() < self.faults.slow

    def page_tokens(self, tags: list[str]) -> int:
        """Output tokens of a page: tokens-per-page, jittered deterministically by image."""
        base = self.config.tokens_per_page
        jitter = self.config.tokens_jitter
        if jitter <= 0 or not tags:
            return base
        u = int(tags[0][-12:], 16) / float(16**12)
        return max(1, round(base * (1 + jitter * (2 * u - 1))))


STATE = web.AppKey("state", ServerState)
