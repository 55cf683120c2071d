"""The fakevllm server process shared by the engine tests that talk to one, and its faults."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.fakevllm.process import FAST, ServerHandle, running_server
from tests.fakevllm.server import EXCLUSIVE_FAULTS


@pytest.fixture(scope="module")
def server() -> Iterator[ServerHandle]:
    """One quick fakevllm server for each test module that asks for it."""
    with running_server(*FAST) as handle:
        yield handle


@pytest.fixture
def faults(server: ServerHandle) -> Iterator[Callable[..., dict[str, float]]]:
    """Set fault rates on the shared server for one test; reset them afterwards."""
    yield server.set_faults
    server.set_faults(**dict.fromkeys((*EXCLUSIVE_FAULTS, "slow"), 0.0))
