"""Completion callbacks: one POST of the job's JSON to the URL the job gave, with retries,
only to hosts the operator allowed (a job service must not be a proxy into the network)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx

from ocrflow.config.access import AccessRefused, parse_url

from .options import OptionError

log = logging.getLogger("ocrflow.service")
ATTEMPTS = 4
TIMEOUT_S = 10.0


def check_callback(url: str | None, allowed_hosts: tuple[str, ...]) -> str | None:
    """``url`` when it is http(s) to an allowed host; ``OptionError`` otherwise."""
    if not url:
        return None
    try:
        # Parsed as the URI policy parses (no user info, control characters, backslashes
        # or oddly encoded paths): what we compare is what httpx will connect to.
        parts = parse_url(url)
    except AccessRefused as exc:
        raise OptionError(f"invalid option 'callback_url': {exc}") from None
    if parts.scheme not in {"http", "https"} or not parts.host:
        raise OptionError("invalid option 'callback_url': give an http(s) URL")
    if parts.host not in {h.lower() for h in allowed_hosts}:
        raise OptionError(
            f"invalid option 'callback_url': host {parts.host!r} is not allowed "
            "(ocrflow serve --allow-callback-host)"
        )
    return url


async def send_callback(url: str, body: dict[str, Any], *, backoff_s: float = 1.0) -> bool:
    """POST ``body`` to ``url``; retry on errors and 5xx/429 with backoff. ``True`` once a
    2xx answer came; ``False`` after the last attempt (or on another 4xx)."""
    async with httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False) as client:
        for attempt in range(ATTEMPTS):
            try:
                response = await client.post(url, json=body)
            except httpx.HTTPError as exc:
                log.warning("callback for job %s: %s", body.get("id"), type(exc).__name__)
            else:
                if response.is_success:
                    return True
                if response.status_code < 500 and response.status_code != 429:
                    return False
            await asyncio.sleep(backoff_s * 2**attempt)
    return False
