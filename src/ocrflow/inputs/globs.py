"""Glob patterns over local folders: where a pattern's fixed part ends, and matching path
parts segment by segment (``**``: any number of parts) without following links."""

from __future__ import annotations

import fnmatch
import glob
import os
from pathlib import Path


def glob_root(pattern: str) -> str:
    """The fixed part of a ``/``-separated pattern, before its first part with a wildcard:
    a local folder, or an object store's prefix (``fs.glob``'s patterns, protocol stripped),
    written as given; ``.`` when the first part has a wildcard, ``/`` for ``/*.pdf``."""
    parts = pattern.split("/")
    fixed = "/".join(parts[: next(i for i, p in enumerate(parts) if glob.has_magic(p))])
    return fixed or ("/" if pattern.startswith("/") else ".")


def glob_without_links(pattern: str) -> list[str]:
    """What ``glob`` matches, found by walking the pattern's fixed folder without
    following links to folders (``glob``'s ``**`` descends into them, out of an allowed
    folder, and loops) and without hidden names."""
    parts = Path(pattern).parts
    wanted = parts[next(i for i, p in enumerate(parts) if glob.has_magic(p)) :]
    root = str(Path(glob_root(pattern)))  # a local path: ``./a//b`` as ``a/b``
    depth = None if "**" in wanted else len(wanted)
    matches: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        base = Path(os.path.relpath(dirpath, root)).parts
        for name in (*dirnames, *filenames):
            if not name.startswith(".") and glob_match(wanted, (*base, name)):
                matches.append(os.path.join(dirpath, name))
        if depth is not None and len(base) + 1 >= depth:
            dirnames[:] = []  # deeper paths cannot match
    return sorted(matches)


def glob_match(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Whether path ``parts`` match glob ``pattern`` segments (``**``: any number of
    parts); linear in the parts, whatever the number of ``**``."""
    states = _past_stars(pattern, {0})
    for part in parts:
        step = set()
        for i in states:
            if i < len(pattern) and pattern[i] == "**":
                step.add(i)
            elif i < len(pattern) and fnmatch.fnmatchcase(part, pattern[i]):
                step.add(i + 1)
        states = _past_stars(pattern, step)
        if not states:
            return False
    return len(pattern) in states


def _past_stars(pattern: tuple[str, ...], states: set[int]) -> set[int]:
    """``states`` plus every position reached by letting ``**`` match nothing."""
    out, todo = set(states), list(states)
    while todo:
        i = todo.pop()
        if i < len(pattern) and pattern[i] == "**" and i + 1 not in out:
            out.add(i + 1)
            todo.append(i + 1)
    return out
