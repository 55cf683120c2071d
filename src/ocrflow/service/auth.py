"""Bearer tokens: read once, kept only as SHA-256 hashes; a token's hash owns its jobs.

Tokens come from ``OCRFLOW_API_TOKENS`` (comma-separated) and/or ``--token-file`` (one a
line). Neither the tokens nor their hashes are ever logged. With no token configured the
service is for this machine only (``check_bind`` refuses any address but loopback).
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from ocrflow.config.environment import TOKENS_VARIABLE, setting
from ocrflow.errors import ConfigError

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def hash_token(token: str) -> str:
    """The hex SHA-256 of a token (tokens are long random strings: no salt is needed)."""
    return hashlib.sha256(token.encode()).hexdigest()


class TokenSet:
    """The hashes of the accepted tokens."""

    def __init__(self, hashes: frozenset[str]) -> None:
        self._hashes = hashes

    @classmethod
    def load(cls, token_file: Path | None = None) -> TokenSet:
        """Tokens from the environment and ``token_file``, hashed at once."""
        raw = (setting(TOKENS_VARIABLE) or "").split(",")
        if token_file is not None:
            raw += token_file.read_text(encoding="utf-8").splitlines()
        return cls(frozenset(hash_token(t.strip()) for t in raw if t.strip()))

    @property
    def enabled(self) -> bool:
        """Whether requests must carry a token."""
        return bool(self._hashes)

    def owner(self, authorization: str | None) -> str | None:
        """The owner (token hash) an ``Authorization`` header proves, or ``None``.

        Without configured tokens every request is the one anonymous owner ``""``.
        """
        if not self.enabled:
            return ""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = hash_token(token.strip())
        # Compare against every hash in constant time per entry (no early exit on a match).
        matches = [h for h in self._hashes if hmac.compare_digest(h, digest)]
        return matches[0] if matches else None


def check_bind(host: str, tokens: TokenSet) -> None:
    """Refuse to serve beyond this machine without tokens."""
    if not tokens.enabled and host not in LOOPBACK:
        raise ConfigError(
            f"refusing to listen on {host} without API tokens: set {TOKENS_VARIABLE} or "
            "--token-file, or listen on 127.0.0.1"
        )
