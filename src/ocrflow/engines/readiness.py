"""Whether an OpenAI-compatible server is ready, in words a user can act on.

``probe_server`` sorts one look at a server into ready, loading, unreachable, auth or
wrong_model. ``ReadyWatch`` turns the looks of every replica, poll after poll, into a
decision: keep waiting (a progress line now and then, shown even with ``-q``), or stop the
run with a typed error:

- every server unreachable (refused, DNS, TLS, connect timeout) for ``unreachable_s``:
  ``EngineUnreachable`` naming each URL and the cause;
- a server refused the API key (401/403): ``EngineAuthError`` at once, without the key;
- a server lists other models on two looks in a row: ``ModelNotServed`` naming them, also
  when another replica is ready (``confirm_models``: never a replica dropped silently);
- nothing ready by the deadline (a server that answers but is still loading is waited for
  this long): ``EngineUnavailable``.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from dataclasses import dataclass, field
from typing import Literal

import httpx

from ocrflow.errors import EngineAuthError, EngineUnavailable, EngineUnreachable, ModelNotServed

log = logging.getLogger("ocrflow.engine")

ReadyState = Literal["ready", "loading", "unreachable", "auth", "wrong_model"]


@dataclass(frozen=True, slots=True)
class Readiness:
    """One look at one server (``url`` is its OpenAI base URL, …/v1)."""

    url: str
    state: ReadyState
    #: Why it is not ready: "connection refused", "/health answered 503", "HTTP 401", …
    detail: str = ""
    #: The model ids the server lists (wrong_model).
    served: tuple[str, ...] = ()
    #: The context length the server reports for our model (vLLM's model card), if any.
    max_model_len: int | None = None

    def describe(self) -> str:
        """The state in a few words, e.g. "loading: /health answered 503"."""
        if self.state == "wrong_model":
            return f"serves only {_names(self.served)}"
        if self.state == "auth":
            return f"refused the API key ({self.detail})"
        return f"{self.state}: {self.detail}" if self.detail else self.state

    @property
    def error(self) -> str | None:
        """``None`` when ready, else one line saying why not."""
        return None if self.state == "ready" else f"{self.url}: {self.describe()}"


async def probe_server(client: httpx.AsyncClient, url: str, model: str) -> Readiness:
    """Look at ``/health`` and ``/v1/models`` once; never raises for the server's trouble.

    A 404/401/403 on ``/health`` is fine (hosted APIs have no open health route): the
    model list decides then. vLLM lists its model before it is warm, so ``/health`` is
    asked first (it answers 503 until the engine runs).
    """
    root = url.removesuffix("/v1")
    try:
        health = await client.get(f"{root}/health", timeout=5.0)
        if health.status_code not in (200, 401, 403, 404):
            return Readiness(url, "loading", f"/health answered {health.status_code}")
        models = await client.get(f"{url}/models", timeout=10.0)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
        return Readiness(url, "unreachable", connect_cause(exc))
    except httpx.HTTPError as exc:
        return Readiness(url, "loading", f"{type(exc).__name__}: {exc}".rstrip(": "))
    return _from_models(url, model, models)


def _from_models(url: str, model: str, answer: httpx.Response) -> Readiness:
    if answer.status_code in (401, 403):
        return Readiness(url, "auth", f"HTTP {answer.status_code}")
    if answer.status_code != 200:
        return Readiness(url, "loading", f"/v1/models answered {answer.status_code}")
    try:
        cards = [c for c in answer.json().get("data", []) if isinstance(c, dict)]
    except (ValueError, AttributeError, TypeError):
        return Readiness(url, "loading", "/v1/models sent no model list")
    served = tuple(str(c.get("id")) for c in cards)
    for card in cards:
        if card.get("id") == model:
            length = card.get("max_model_len")
            return Readiness(url, "ready", max_model_len=length if type(length) is int else None)
    if not served:
        return Readiness(url, "loading", "no model listed yet")
    return Readiness(url, "wrong_model", served=served)


async def confirm_models(
    urls: list[str],
    model: str,
    *,
    api_key: str | None = None,
    second_look_s: float = 1.0,
) -> None:
    """Once one replica is ready: ``ModelNotServed`` when another one lists only other
    models on two looks ``second_look_s`` apart (a replica serving another model is a
    mistake in the set-up, not a replica to drop silently); other states are left to the
    engine's health checks (a loading or unreachable replica may come later)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(headers=headers, timeout=10.0) as client:
        wrong = [url for url, look in await _looks(client, urls, model) if look == "wrong_model"]
        if not wrong:
            return
        await asyncio.sleep(second_look_s)
        for url in wrong:
            look = await probe_server(client, url, model)
            if look.state == "wrong_model":
                raise ModelNotServed(_not_served(look, model))


async def _looks(
    client: httpx.AsyncClient, urls: list[str], model: str
) -> list[tuple[str, ReadyState]]:
    looks = await asyncio.gather(*(probe_server(client, url, model) for url in urls))
    return [(look.url, look.state) for look in looks]


def _not_served(look: Readiness, model: str) -> str:
    return (
        f"the server at {look.url} does not serve the model {model!r}; it serves "
        f"{_names(look.served)} (pass one of them as --model, or --served-model-name)"
    )


def connect_cause(exc: BaseException) -> str:
    """Why a connection failed, from the innermost error that says so.

    httpx's own text is often "All connection attempts failed"; the OS error it wraps
    says "refused", the resolver's says the name is unknown, ssl's says what TLS disliked.
    """
    fallback = str(exc) or type(exc).__name__
    node: BaseException | None = exc
    seen: set[int] = set()
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        if isinstance(node, ssl.SSLError):
            return f"TLS error: {getattr(node, 'verify_message', None) or node}"
        if isinstance(node, socket.gaierror):
            return f"DNS lookup failed: {node.strerror or node}"
        if isinstance(node, ConnectionRefusedError):
            return "connection refused"
        if isinstance(node, TimeoutError | httpx.ConnectTimeout):
            return "connection timed out"
        if isinstance(node, OSError) and node.strerror:
            fallback = node.strerror
        node = node.__cause__ or node.__context__
    return fallback


@dataclass
class ProgressNotes:
    """When to say "still waiting": first after ``after_s``, then every ``every_s``."""

    after_s: float = 5.0
    every_s: float = 15.0
    _next: float | None = None

    def due(self, elapsed: float) -> bool:
        """Whether a note is due ``elapsed`` seconds into the wait (and count it as given)."""
        if elapsed < (self.after_s if self._next is None else self._next):
            return False
        self._next = elapsed + self.every_s
        return True


@dataclass
class ReadyWatch:
    """Judges each poll of every replica: keep waiting, or raise the error that says why."""

    model: str
    deadline_s: float
    unreachable_s: float
    #: Whether we sent an API key (the message for a 401 differs).
    keyed: bool = False
    notes: ProgressNotes = field(default_factory=ProgressNotes)
    #: Looks in a row on which a server listed other models before we believe it.
    wrong_model_looks: int = 2
    started: float = field(default_factory=time.monotonic)
    _unreachable_since: float | None = None
    _wrong_looks: int = 0

    def judge(self, looks: list[Readiness], now: float | None = None) -> None:
        """Return to keep waiting (logging progress when due); raise to stop."""
        now = time.monotonic() if now is None else now
        self._check_auth(looks)
        self._check_model(looks)
        self._check_reachable(looks, now)
        elapsed = now - self.started
        if elapsed >= self.deadline_s:
            reasons = "; ".join(look.error or "" for look in looks)
            raise EngineUnavailable(f"no server became ready in {self.deadline_s:g} s: {reasons}")
        if self.notes.due(elapsed):
            for look in looks:
                log.warning("waiting for the server at %s: %s (%.0f s)",
                            look.url, look.describe(), elapsed)  # fmt: skip

    def left_s(self, now: float | None = None) -> float:
        """Seconds until the deadline."""
        now = time.monotonic() if now is None else now
        return max(0.0, self.started + self.deadline_s - now)

    def _check_auth(self, looks: list[Readiness]) -> None:
        for look in looks:
            if look.state != "auth":
                continue
            if self.keyed:
                raise EngineAuthError(
                    f"the server at {look.url} refused the API key ({look.detail}); "
                    "check --api-key / OCRFLOW_API_KEY / OPENAI_API_KEY"
                )
            raise EngineAuthError(
                f"the server at {look.url} wants an API key ({look.detail}); "
                "pass --api-key or set OPENAI_API_KEY"
            )

    def _check_model(self, looks: list[Readiness]) -> None:
        wrong = [look for look in looks if look.state == "wrong_model"]
        self._wrong_looks = self._wrong_looks + 1 if wrong else 0
        if wrong and self._wrong_looks >= self.wrong_model_looks:
            raise ModelNotServed(_not_served(wrong[0], self.model))

    def _check_reachable(self, looks: list[Readiness], now: float) -> None:
        if not looks or any(look.state != "unreachable" for look in looks):
            self._unreachable_since = None
            return
        if self._unreachable_since is None:
            self._unreachable_since = now
        if now - self._unreachable_since < self.unreachable_s:
            return
        causes = "; ".join(f"{look.url}: {look.detail}" for look in looks)
        where = "the server" if len(looks) == 1 else "any server"
        raise EngineUnreachable(
            f"cannot reach {where} for {self.unreachable_s:g} s: {causes} "
            "(is it running, and is the URL right? --unreachable-timeout sets the wait)"
        )


def _names(served: tuple[str, ...]) -> str:
    return ", ".join(repr(name) for name in served) or "no model"
