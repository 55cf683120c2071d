"""Shared fixtures (the corpus, generated samples) and the guard that no group of tests
skips silently (see ``tests/needs.py``)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

# The headless-Chromium fixtures, available to every test (see tests/browser.py).
from tests.browser import browser, module_browser  # noqa: F401
from tests.needs import ALLOW_VARIABLE, CORPUS, allowed_groups, need, skipped_group

# One moto S3 server for the whole session, for every module that asks for it: defined once
# here, so that no module's own copy leaves this process's environment (and fsspec's cached
# S3 filesystem) pointing at another module's server.
from tests.s3server import s3_endpoint  # noqa: F401

REPO = Path(__file__).resolve().parents[1]

# Shared checks outside test modules still explain a failed assert.
pytest.register_assert_rewrite("tests.unit.sinks.alto_hocr_helpers")

sys.path.insert(0, str(REPO / "scripts"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared real-world corpus (../shared/corpus), read in place, never copied."""
    need("corpus", CORPUS.is_dir(), "../shared/corpus is not present beside the repository")
    return CORPUS


@pytest.fixture(scope="session")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample documents, generated afresh by scripts/make_examples.py."""
    import make_examples

    target = tmp_path_factory.mktemp("samples")
    make_examples.main(target)
    return target


class SkipGuard:
    """Counts the tests each group skipped for want of what it needs, and fails the session
    for every group that ``OCRFLOW_ALLOW_SKIP`` does not name."""

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()

    def _count(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if report.skipped:
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            group = skipped_group(reason)
            if group is not None:
                self.skipped[group] += 1

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._count(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._count(report)

    def forbidden(self) -> dict[str, int]:
        allowed = allowed_groups()
        return {g: n for g, n in sorted(self.skipped.items()) if g not in allowed}

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.forbidden() and session.exitstatus in (0, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        forbidden = self.forbidden()
        if not forbidden:
            return
        groups = ", ".join(f"{group} ({count} tests)" for group, count in forbidden.items())
        terminalreporter.write_line(
            f"FAILED: whole test groups skipped: {groups}. Install what they need "
            f"(bash scripts/system-deps.sh) or allow it: {ALLOW_VARIABLE}=" + ",".join(forbidden),
            red=True,
            bold=True,
        )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SkipGuard(), "ocrflow-skip-guard")
