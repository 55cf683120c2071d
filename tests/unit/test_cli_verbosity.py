"""Every ``ocrflow`` command takes ``-v/--verbose`` (DEBUG logs) and ``-q/--quiet`` (only
warnings and errors), through the one log set-up of ``observe.logs``."""

from __future__ import annotations

import contextlib
import io
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ocrflow.cli import app
from ocrflow.observe.logs import NORMAL, QUIET, VERBOSE, configure_logging, verbosity

DEBUG_LINE = "DEBUG ocrflow "


def _cases(tmp: Path) -> dict[str, list[str]]:
    """Each command with arguments that get it past its log set-up and then stop it fast
    (a missing OUT, a usage error, a refused bind), so that no run, model or server starts."""
    missing = str(tmp / "missing")
    return {
        "run": ["run", str(tmp / "empty"), "-o", str(tmp / "out")],
        "retry": ["retry", missing],
        "worker": ["worker"],
        "status": ["status", missing],
        "export": ["export", missing, str(tmp / "dest")],
        "describe": ["describe", missing],
        "assemble": ["assemble", missing],
        "eval": ["eval", missing],
        "review": ["review", missing],
        "serve": ["serve", "--root", str(tmp / "root"), "--host", "0.0.0.0"],
        "serve-engine": ["serve-engine", "--model", "x", "--recipe", "no-such-recipe"],
        "recipes": ["recipes", "--json"],
    }


COMMANDS = list(_cases(Path("/nonexistent")))


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Put the root and ``ocrflow`` loggers back as pytest had them."""
    root, ours = logging.getLogger(), logging.getLogger("ocrflow")
    handlers, levels = list(root.handlers), (root.level, ours.level)
    yield
    root.handlers[:] = handlers
    root.setLevel(levels[0])
    ours.setLevel(levels[1])


def _invoke(tmp_path: Path, command: str, *flags: str) -> tuple[int, str]:
    (tmp_path / "empty").mkdir(exist_ok=True)
    result = CliRunner().invoke(app, [*_cases(tmp_path)[command], *flags])
    assert not isinstance(result.exception, (TypeError, AttributeError)), result.exception
    return result.exit_code, result.stderr


def test_every_command_is_covered() -> None:
    registered = {c.name for c in app.registered_commands}
    assert registered == set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_names_both_flags(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for flag in ("-v", "--verbose", "-q", "--quiet"):
        assert f" {flag} " in result.output or f" {flag}," in result.output, flag


@pytest.mark.parametrize("command", COMMANDS)
def test_verbose_shows_debug_lines(tmp_path: Path, command: str) -> None:
    for flag in ("-v", "--verbose"):
        code, stderr = _invoke(tmp_path, command, flag)
        assert DEBUG_LINE in stderr, (code, stderr)
        assert logging.getLogger("ocrflow.any").isEnabledFor(logging.DEBUG)


@pytest.mark.parametrize("command", COMMANDS)
def test_quiet_hides_info_and_default_hides_debug(tmp_path: Path, command: str) -> None:
    _, stderr = _invoke(tmp_path, command, "-q")
    assert " INFO " not in stderr and " DEBUG " not in stderr, stderr
    assert not logging.getLogger("ocrflow.any").isEnabledFor(logging.INFO)
    assert logging.getLogger("ocrflow.any").isEnabledFor(logging.WARNING)
    _, stderr = _invoke(tmp_path, command)
    assert " DEBUG " not in stderr, stderr
    assert logging.getLogger("ocrflow.any").isEnabledFor(logging.INFO)


def test_the_levels_reach_the_handler() -> None:
    """What each level lets through, as written to stderr by the one handler."""
    log = logging.getLogger("ocrflow.test")
    seen = {}
    for level in (QUIET, NORMAL, VERBOSE):
        buffer = io.StringIO()
        with contextlib.redirect_stderr(buffer):
            configure_logging(level)
            log.debug("a debug line")
            log.info("an info line")
            log.warning("a warning line")
            logging.getLogger("PIL.PngImagePlugin").debug("a chunk")
            logging.getLogger("alembic.runtime").info("plugin set-up")
        seen[level] = buffer.getvalue()
    assert "a warning line" in seen[QUIET] and "an info line" not in seen[QUIET]
    assert "an info line" in seen[NORMAL] and "a debug line" not in seen[NORMAL]
    assert "a debug line" in seen[VERBOSE] and "an info line" in seen[VERBOSE]
    for text in seen.values():
        assert "a chunk" not in text and "plugin set-up" not in text  # other libraries' noise
    ours = [h for h in logging.getLogger().handlers if type(h).__name__ == "_StderrHandler"]
    assert len(ours) == 1, "configuring again replaces the handler"


def test_flags_combine() -> None:
    assert verbosity(False, False) == NORMAL
    assert verbosity(True, False) == VERBOSE
    assert verbosity(False, True) == QUIET
    assert verbosity(True, True) == NORMAL


def test_the_installed_command_logs_debug_with_v(tmp_path: Path) -> None:
    """The console script itself, in its own process."""
    ocrflow = Path(sys.executable).with_name("ocrflow")
    loud = subprocess.run(
        [str(ocrflow), "status", "-v", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert loud.returncode == 2 and DEBUG_LINE in loud.stderr, loud.stderr
    quiet = subprocess.run(
        [str(ocrflow), "status", "-q", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert quiet.returncode == 2 and DEBUG_LINE not in quiet.stderr, quiet.stderr
    assert "holds no ocrflow run" in quiet.stderr, "errors still show with -q"
