"""One exception tree. Translate at the boundary: ``raise EngineUnavailable(...) from exc``."""

from __future__ import annotations


class OcrflowError(Exception):
    """Base of every error ocrflow raises on purpose."""

    reason: str = "error"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class ConfigError(OcrflowError):
    """A configuration or usage error: the run cannot start as asked."""

    reason = "config"


class SourceError(OcrflowError):
    """An input could not be found, read or recognised."""

    reason = "not_a_document"


class RenderError(OcrflowError):
    """A document or page could not be opened or rendered; ``reason`` says why."""

    reason = "render_error"


class EngineError(OcrflowError):
    """An engine call failed."""

    reason = "engine_error"


class EngineUnavailable(EngineError):
    """Transient: the engine is unreachable, overloaded or timed out. Back off and retry."""


class EngineRejected(EngineError):
    """The engine refused the request as sent. Do not retry it unchanged."""

    def __init__(self, message: str, *, context_overflow: bool = False, status: int = 0) -> None:
        super().__init__(message)
        self.context_overflow = context_overflow
        self.status = status


class ParseError(OcrflowError):
    """The model's output could not be used. A new attempt may succeed."""

    reason = "parse_error"


class WorkspaceError(OcrflowError):
    """The workspace is unusable or belongs to a different configuration."""

    reason = "workspace"
