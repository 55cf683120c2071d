from __future__ import annotations

from pathlib import Path

import pytest

from ocrflow.errors import SourceError
from ocrflow.inputs.expand import expand_inputs
from ocrflow.inputs.source import sniff_kind


def test_sniff_by_content() -> None:
    assert sniff_kind(b"%PDF-1.7\n") == "pdf"
    assert sniff_kind(b"garbage before header %PDF-1.4") == "pdf"
    assert sniff_kind(b"\x89PNG\r\n\x1a\n....") == "image"
    assert sniff_kind(b"\xff\xd8\xff\xe0") == "image"
    assert sniff_kind(b"II*\x00") == "image"
    assert sniff_kind(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image"
    assert sniff_kind(b"") == "empty"
    assert sniff_kind(b"not even a pdf") == "unknown"


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    (root / "sub").mkdir(parents=True)
    (root / "a.pdf").write_bytes(b"%PDF-1.4 x")
    (root / "sub" / "scan.bin").write_bytes(b"\x89PNG\r\n\x1a\nxx")  # an image with an odd name
    (root / "sub" / "fake.pdf").write_bytes(b"hello")  # named like a document: kept, fails later
    (root / "notes.txt").write_text("not a document")
    (root / ".hidden.pdf").write_bytes(b"%PDF-1.4")
    return root


def test_directory_walk_recognises_content(tmp_path: Path) -> None:
    sources = expand_inputs([str(_tree(tmp_path))])
    found = {s.rel: s.kind for s in sources}
    assert found == {"a.pdf": "pdf", "sub/fake.pdf": "unknown", "sub/scan.bin": "image"}


def test_list_file_and_glob_and_dedupe(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    listing = tmp_path / "list.txt"
    listing.write_text(f"# comment\n{root / 'a.pdf'}\n\n{root / 'sub' / 'scan.bin'}\n")
    sources = expand_inputs([f"@{listing}", str(root / "*.pdf"), str(root / "a.pdf")])
    assert [s.rel for s in sources] == ["a.pdf", "scan.bin"]


def test_output_directory_is_excluded(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    out = root / "out"
    (out / "markdown").mkdir(parents=True)
    (out / "markdown" / "x.pdf").write_bytes(b"%PDF-1.4")
    rels = {s.rel for s in expand_inputs([str(root)], exclude=[str(out)])}
    assert "out/markdown/x.pdf" not in rels


def test_missing_input_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file"):
        expand_inputs([str(tmp_path / "nope.pdf")])
    with pytest.raises(SourceError, match="no file matches"):
        expand_inputs([str(tmp_path / "*.nothing")])
