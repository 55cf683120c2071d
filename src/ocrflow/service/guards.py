"""ASGI guards around the service's app: security headers on every answer, the Host and
Origin checks of a service that runs without tokens, and a client that goes away mid-request
logged as one line instead of a traceback.

Without tokens, anything that can reach the port is trusted: a page on another origin
could POST a job from the user's browser (a form post needs no CORS preflight), and a
host name that re-binds to 127.0.0.1 could read the answers. So without tokens the Host
header must name this machine's loopback, and a request that changes state must not come
from another origin. With tokens neither applies: a token travels in a header that no
other origin can make a browser send.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import ClientDisconnect

log = logging.getLogger("ocrflow.service")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Every answer: nothing from other origins, no framing, no type sniffing, no referrer.
SECURITY_HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data: blob:; script-src 'self'; "
        b"style-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
        b"form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


class ServiceGuards:
    """Wraps the app; ``open_access`` is true when the service runs without tokens."""

    def __init__(self, app: ASGIApp, *, open_access: bool) -> None:
        self.app = app
        self.open_access = open_access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope) if self.open_access else None
        if refusal is not None:
            await _send_error(send, 403, refusal)
            return
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in SECURITY_HEADERS if k not in names]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except ClientDisconnect:
            client = scope.get("client") or ("?", 0)
            log.info("client %s went away during %s %s", client[0], scope["method"],
                     scope["path"])  # fmt: skip
            if not started:
                return

    def _refusal(self, scope: Scope) -> str | None:
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        host = _host_name(headers.get(b"host", b"").decode("latin-1"))
        if host not in LOOPBACK_HOSTS:
            return "this service runs without tokens and answers only to a loopback Host"
        if scope["method"] in SAFE_METHODS:
            return None
        if headers.get(b"sec-fetch-site", b"") == b"cross-site":
            return "cross-site requests are refused"
        origin = headers.get(b"origin")
        if origin is not None and _host_name(urlsplit(origin.decode("latin-1")).netloc) not in (
            LOOPBACK_HOSTS
        ):
            return "requests from another origin are refused"
        return None


def _host_name(netloc: str) -> str:
    """The host of a ``Host`` header or an origin's netloc, lower case, without the port."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        return netloc[1:].partition("]")[0]
    return netloc.rpartition(":")[0] if netloc.count(":") == 1 else netloc


async def _send_error(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, *SECURITY_HEADERS]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})
