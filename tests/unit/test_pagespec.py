from __future__ import annotations

import pytest

from ocrflow.errors import ConfigError
from ocrflow.pagespec import select_pages, validate_page_spec


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
