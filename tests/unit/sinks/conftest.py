"""One real run over the examples in the text formats these tests read (json, docling,
chunks, with Markdown and JSONL beside them), shared by the modules that check them: one
embedded-engine run instead of one a module."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.integration.cli_helpers import ocrflow

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FORMATS = ["markdown", "jsonl", "json", "chunks"]


@pytest.fixture(scope="session")
def examples_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """OUT of ``ocrflow run examples/`` in markdown, jsonl, json, chunks and (where
    docling-core is installed) docling."""
    formats = FORMATS + (["docling"] if importlib.util.find_spec("docling_core") else [])
    out = tmp_path_factory.mktemp("examples") / "out"
    done = ocrflow("run", str(EXAMPLES), "-o", str(out), "--format", ",".join(formats), "-q")
    assert done.returncode == 0, done.stderr[-3000:]
    return out
