"""One ``glob_root`` for local folders and object stores: where a pattern's fixed part ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

from ocrflow.inputs.globs import glob_root, glob_without_links
from ocrflow.inputs.remote import expand_remote


@pytest.mark.parametrize(
    ("pattern", "root"),
    [
        ("docs/*.pdf", "docs"),
        ("/srv/in/**/*.pdf", "/srv/in"),
        ("bucket/scans/2024-*/p.png", "bucket/scans"),
        ("*.pdf", "."),
        ("/*.pdf", "/"),
        ("a/b[12]/c.pdf", "a"),
        ("a/b?/c.pdf", "a"),
    ],
)
def test_the_fixed_part_of_a_pattern(pattern: str, root: str) -> None:
    assert glob_root(pattern) == root


def test_a_local_glob_lists_the_same_through_dot_and_double_slashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "in" / "sub").mkdir(parents=True)
    for name in ("a.pdf", "sub/b.pdf", ".hidden.pdf", "c.txt"):
        (tmp_path / "in" / name).write_bytes(b"%PDF-1.4")
    monkeypatch.chdir(tmp_path)
    plain = glob_without_links("in/**/*.pdf")
    assert plain == ["in/a.pdf", "in/sub/b.pdf"]
    assert glob_without_links("./in/**/*.pdf") == plain
    assert glob_without_links("in//**/*.pdf") == plain


@pytest.fixture
def bucket() -> Iterator[str]:
    fs = fsspec.filesystem("memory")
    base = "/globroot-bucket"
    for key in ("scans/2024-01/a.pdf", "scans/2024-02/b.pdf", "scans/2024-02/.c.pdf",
                "scans/other/d.pdf"):  # fmt: skip
        fs.pipe(f"{base}/{key}", b"%PDF-1.4 ")
    yield f"memory://{base}"
    fs.rm(base, recursive=True)


def test_a_remote_glob_names_objects_from_its_fixed_part(bucket: str) -> None:
    found = sorted(s.rel for s in expand_remote(f"{bucket}/scans/2024-*/*.pdf"))
    assert found == ["2024-01/a.pdf", "2024-02/b.pdf"]
    found = sorted(s.rel for s in expand_remote(f"{bucket}/scans/**/*.pdf"))
    assert found == ["2024-01/a.pdf", "2024-02/b.pdf", "other/d.pdf"]
