"""Shared fixtures: where the real-world corpus is, and small generated documents."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"

sys.path.insert(0, str(REPO / "scripts"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared real-world corpus (../shared/corpus), read in place, never copied."""
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is not present beside the repository")
    return CORPUS


@pytest.fixture(scope="session")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample documents, generated afresh by scripts/make_examples.py."""
    import make_examples

    target = tmp_path_factory.mktemp("samples")
    make_examples.main(target)
    return target
