"""One exception tree. Translate at the boundary: ``raise EngineUnavailable(...) from exc``."""

from __future__ import annotations

import importlib
from typing import TypeVar

ErrorT = TypeVar("ErrorT", bound=BaseException)


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


class MissingExtra(ConfigError):
    """A feature needs a package of an optional extra that is not installed: the message is
    the one ``pip install 'ocrflow[extra]'`` line that fixes it (``ocrflow`` exits 2)."""

    reason = "missing_extra"

    def __init__(self, feature: str, extra: str, package: str) -> None:
        super().__init__(
            f"{feature} needs {package}, which is not installed: pip install 'ocrflow[{extra}]'"
        )
        self.feature = feature
        self.extra = extra
        self.package = package


def require(*modules: str, extra: str, feature: str) -> None:
    """Raise ``MissingExtra`` unless every one of ``modules`` imports. Call it where a
    feature starts (a command, a format, an input kind), before the code that imports them at
    its top: a missing extra is then one line saying what to install, not a traceback.

    ``require("pyarrow", extra="parquet", feature="--format parquet")``
    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:  # absent, or a broken install: either way the extra fixes it
            raise MissingExtra(feature, extra, module.split(".", 1)[0]) from None


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


class EngineSetupError(EngineError):
    """The engine cannot serve this run as configured: retrying pages would not help, so
    the run stops at start-up (``ocrflow`` exits 2) with a message that says what to fix."""


class EngineUnreachable(EngineSetupError):
    """No server could be connected to (refused, DNS, TLS, connect timeout) for a while."""


class EngineAuthError(EngineSetupError):
    """A server refused the API key (HTTP 401/403). The message never contains the key."""


class ModelNotServed(EngineSetupError):
    """A server answers but does not list the model asked for; the message names its models."""


class EngineFailing(EngineError):
    """Every server failed every request for ``--fail-after`` seconds (HTTP errors, no
    answer, replies that are not completions): the run stops (``ocrflow`` exits 4) instead
    of waiting out each page's deadline. Unfinished pages stay pending: the same command
    resumes once the servers answer again."""

    reason = "engine_failing"


class ParseError(OcrflowError):
    """The model's output could not be used. A new attempt may succeed."""

    reason = "parse_error"


class WorkspaceError(OcrflowError):
    """The workspace is unusable or belongs to a different configuration."""

    reason = "workspace"


class OutputError(WorkspaceError):
    """OUT could not be written (or read): disk full, read-only, no permission, name too long.

    Not a document's failure: the run stops (``ocrflow`` exits 3), finished documents stay
    intact, and the next run resumes once the cause is fixed.
    """

    reason = "output"

    def __init__(self, path: str, strerror: str, *, action: str = "write") -> None:
        super().__init__(f"cannot {action} {path}: {strerror}")
        self.path = path
        self.strerror = strerror


def first_error(exc: BaseException | None, kind: type[ErrorT]) -> ErrorT | None:
    """The first ``kind`` error behind ``exc``: ``exc`` itself, a member of an exception group
    (a task group re-raises its tasks' errors together), or one that a cleanup step
    interrupted (a second failed write while stopping replaces the first)."""
    if exc is None:
        return None
    earlier = first_error(exc.__context__, kind)
    if earlier is not None:
        return earlier
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = first_error(inner, kind)
            if found is not None:
                return found
    return None
