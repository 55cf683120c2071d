"""``ocrflow export --format hf`` needs ``datasets`` (the ``hf`` extra): without it the
command exits 2 with the install line, before it writes anything."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ocrflow.cli import app
from ocrflow.errors import ConfigError
from ocrflow.stages.export import export


@pytest.fixture
def no_datasets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "datasets" or m.startswith("datasets.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "datasets", None)  # ``import datasets`` fails


@pytest.mark.usefixtures("no_datasets")
def test_the_command_exits_2_naming_the_extra(tmp_path: Path) -> None:
    dest = tmp_path / "hf"
    result = CliRunner().invoke(app, ["export", str(tmp_path), str(dest), "--format", "hf"])
    assert result.exit_code == 2, result.output
    assert "pip install 'ocrflow[hf]'" in result.stderr
    assert "Traceback" not in result.output
    assert not dest.exists(), "nothing is written"


@pytest.mark.usefixtures("no_datasets")
def test_the_function_raises_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ocrflow\[hf\]"):
        export(str(tmp_path), "hf", str(tmp_path / "hf"))


@pytest.mark.usefixtures("no_datasets")
def test_parquet_needs_no_datasets(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no finished ocrflow documents"):
        export(str(tmp_path), "parquet", str(tmp_path / "pq"))
