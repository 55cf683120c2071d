"""Page selections such as ``1-5,9,20-end``."""

from __future__ import annotations

import re

from ocrflow.errors import ConfigError

_PART = re.compile(r"^\s*(\d+|end)\s*(?:-\s*(\d+|end)\s*)?$")


def validate_page_spec(spec: str) -> str:
    """Return ``spec`` unchanged if it parses, else raise ``ConfigError``."""
    for part in spec.split(","):
        match = _PART.match(part)
        if not match:
            raise ConfigError(f"bad page selection {part!r} in {spec!r}; use e.g. 1-5,9,20-end")
        first, last = match.group(1), match.group(2) or match.group(1)
        if first == "end" and last != "end":
            # "end-3" reads as "the last three pages" to some and as "from the last page
            # back to page 3" to others: refuse it rather than guess.
            raise ConfigError(
                f"bad page selection {part!r}: a range runs forwards and 'end' can only close "
                "it (e.g. 20-end); to take the last pages of a document, name them from a number"
            )
        if first != "end" and last != "end" and int(first) > int(last):
            raise ConfigError(f"page range {part!r} runs backwards")
        if first == "0" or last == "0":
            raise ConfigError("pages are numbered from 1")
    return spec


def select_pages(spec: str | None, page_count: int) -> tuple[int, ...]:
    """The 1-based page numbers ``spec`` selects in a document of ``page_count`` pages.

    Pages past the end are ignored, so ``1-5`` on a 3-page document gives 1, 2, 3.
    """
    if not spec:
        return tuple(range(1, page_count + 1))
    chosen: set[int] = set()
    for part in validate_page_spec(spec).split(","):
        match = _PART.match(part)
        assert match is not None
        first = _resolve(match.group(1), page_count)
        last = _resolve(match.group(2) or match.group(1), page_count)
        chosen.update(range(first, min(last, page_count) + 1))
    return tuple(sorted(chosen))


def _resolve(token: str, page_count: int) -> int:
    return page_count if token == "end" else int(token)
