from __future__ import annotations

import pytest

from ocrflow.config.pagespec import select_pages, validate_page_spec
from ocrflow.errors import ConfigError


@pytest.mark.parametrize(
    ("spec", "count", "expected"),
    [
        (None, 3, (1, 2, 3)),
        ("1-5,9,20-end", 22, (1, 2, 3, 4, 5, 9, 20, 21, 22)),
        ("1-5", 3, (1, 2, 3)),
        ("end", 7, (7,)),
        ("2, 2, 1", 4, (1, 2)),
        ("9", 3, ()),
    ],
)
def test_select_pages(spec: str | None, count: int, expected: tuple[int, ...]) -> None:
    assert select_pages(spec, count) == expected


@pytest.mark.parametrize("spec", ["a-b", "5-2", "0", "1-", "-3", "1;2"])
def test_bad_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError):
        validate_page_spec(spec)


@pytest.mark.parametrize("spec", ["end-3", "1,end-2", "end-1"])
def test_ranges_starting_at_end_are_refused_with_a_reason(spec: str) -> None:
    with pytest.raises(ConfigError, match="'end' can only close"):
        validate_page_spec(spec)


def test_end_to_end_is_the_last_page() -> None:
    assert select_pages("end-end", 5) == (5,)


def test_the_cli_refuses_end_minus_n(tmp_path) -> None:
    from typer.testing import CliRunner

    from ocrflow.cli import app

    (tmp_path / "a.png").write_bytes(b"")
    result = CliRunner().invoke(
        app, ["run", str(tmp_path / "a.png"), "-o", str(tmp_path / "out"), "--pages", "end-3"]
    )
    assert result.exit_code == 2
    assert "'end' can only close" in result.output
    assert not (tmp_path / "out").exists()
