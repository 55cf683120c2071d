"""The one log set-up of every ``ocrflow`` command, and the ``-v/--verbose`` and
``-q/--quiet`` flags each command declares with it.

A command takes ``verbose: Verbose = False, quiet: Quiet = False`` and calls
``configure_logging(verbosity(verbose, quiet))`` before it does anything else.
"""

from __future__ import annotations

import logging
import platform
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, TextIO

import typer

#: ``-q``: warnings and errors only; default: INFO and up; ``-v``: DEBUG and up.
QUIET, NORMAL, VERBOSE = -1, 0, 1

Verbose = Annotated[
    bool, typer.Option("-v", "--verbose", help="Debug logs too (what each step does and why).")
]
Quiet = Annotated[bool, typer.Option("-q", "--quiet", help="Only warnings and errors.")]

#: Libraries that log a line per request (httpx: shown with -v only) or per start
#: (botocore: where it found credentials; alembic: ~20 lines of plugin set-up, never useful)
#: — far too much for a run of a million pages.
_PER_REQUEST = ("httpx",)
_NOISY = ("botocore", "aiobotocore", "alembic")
_FORMAT = "%(asctime)s %(levelname)s %(message)s"


def verbosity(verbose: bool, quiet: bool) -> int:
    """One level from the two flags (both given: they cancel out)."""
    return int(verbose) - int(quiet)


def log_level(level: int) -> int:
    """The ``logging`` level for a verbosity (``QUIET``, ``NORMAL`` or ``VERBOSE``)."""
    if level <= QUIET:
        return logging.WARNING
    return logging.DEBUG if level >= VERBOSE else logging.INFO


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is when a record comes, not when the handler was
    made: a command run again in the same process (tests, ``CliRunner``) logs where its
    stderr now goes, never to a stream closed since."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr  # ``handle`` holds the handler's lock here
        super().emit(record)

    def flush(self) -> None:
        self.stream = sys.stderr
        super().flush()


def configure_logging(level: int = NORMAL) -> None:
    """Log ``ocrflow``'s messages to stderr at ``level`` (see ``verbosity``).

    Calling it again replaces the earlier set-up (one handler, never two); handlers that
    others put on the root logger are left alone.
    """
    # Names that are not UTF-8 are shown escaped (``names.shown``); should one slip through
    # to a print or a log line, it is written as ``\udce9``, never a UnicodeEncodeError.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(old)
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter(_FORMAT))
    root.addHandler(handler)
    # -v is about ocrflow's own DEBUG lines; other libraries' (Pillow: a line per PNG
    # chunk) would bury them, so the root logger stops at INFO.
    root.setLevel(max(log_level(level), logging.INFO))
    logging.getLogger("ocrflow").setLevel(log_level(level))
    for name in _NOISY:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in _PER_REQUEST:  # -v: which requests went out (their DEBUG is wire detail)
        logging.getLogger(name).setLevel(logging.INFO if level >= VERBOSE else logging.WARNING)
    # The first line of a -v log says which ocrflow wrote it (bug reports need it).
    logging.getLogger("ocrflow").debug(
        "ocrflow %s, Python %s, %s", _version(), platform.python_version(), sys.platform
    )


def _version() -> str:
    # From the installed metadata: ``ocrflow/__init__`` would load the whole API here.
    try:
        return version("ocrflow")
    except PackageNotFoundError:
        return "unknown"


def uvicorn_log_level(level: int) -> str:
    """The same verbosity as uvicorn's ``log_level``."""
    return {logging.WARNING: "warning", logging.INFO: "info"}.get(log_level(level), "debug")
