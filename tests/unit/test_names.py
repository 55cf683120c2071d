"""Output names: byte caps on multi-byte names, extensions kept, never outside OUT, and no two
sources sharing one output (Unicode twins, case twins, the same path under two inputs)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from ocrflow.inputs.source import Source
from ocrflow.sinks import markdown_key
from ocrflow.storage.local import LocalStore
from ocrflow.storage.names import MAX_COMPONENT_BYTES, cap_component, safe_relpath, unique_names

CJK_200 = "文" * 200 + ".pdf"  # 604 bytes: fine as an S3 key, too long for any file name
EMOJI = "😀" * 100 + ".png"  # 4-byte characters
NFC = unicodedata.normalize("NFC", "café.pdf")
NFD = unicodedata.normalize("NFD", "café.pdf")


def _bytes(text: str) -> int:
    return len(text.encode())


def _source(rel: str, root: str = "/in") -> Source:
    return Source(f"{root}/{rel}", rel, "pdf", 1)


@pytest.mark.parametrize("name", [CJK_200, EMOJI, "é" * 300 + ".tiff", "x" * 1000])
def test_long_names_are_capped_in_bytes_and_keep_their_extension(name: str) -> None:
    safe = safe_relpath(name)
    assert _bytes(safe) <= MAX_COMPONENT_BYTES
    assert _bytes(markdown_key(name).rsplit("/", 1)[-1]) <= 255  # the Markdown file's name
    assert safe.endswith(Path(name).suffix) if "." in name else "~" in safe
    assert safe.split("~")[0] == name[: len(safe.split("~")[0])]  # a true prefix, no junk
    assert safe_relpath(safe) == safe  # planning and the sink apply it twice


@pytest.mark.parametrize("pad", range(4))
def test_a_cut_never_splits_a_multibyte_character(pad: int) -> None:
    # Shift the cut through every byte offset of 2-, 3- and 4-byte characters.
    for char in ("é", "文", "😀"):
        name = "a" * pad + char * 200 + ".pdf"
        capped = cap_component(name)
        assert capped.encode().decode() == capped
        assert set(capped.split("~")[0]) <= {"a", char}
        assert MAX_COMPONENT_BYTES - 4 < _bytes(capped) <= MAX_COMPONENT_BYTES


def test_long_names_with_the_same_start_stay_distinct() -> None:
    first, second = "文" * 90 + "-a.pdf", "文" * 90 + "-b.pdf"
    assert safe_relpath(first) != safe_relpath(second)
    assert all(safe_relpath(n).endswith(".pdf") for n in (first, second))


def test_every_part_of_a_path_is_capped() -> None:
    safe = safe_relpath(f"{'目录' * 100}/{CJK_200}")
    assert all(_bytes(part) <= MAX_COMPONENT_BYTES for part in safe.split("/"))
    assert safe.count("/") == 1


@pytest.mark.parametrize(
    "rel",
    [
        "../../etc/passwd",
        "/abs/x.pdf",
        "a/../../../b.pdf",
        "..\\..\\w.pdf",
        "",
        "/",
        "./..",
        "\x00",
    ],
)
def test_names_never_leave_out(rel: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    store = LocalStore(out)
    key = markdown_key(rel)
    store.write_bytes(key, b"x")  # LocalStore refuses keys outside OUT: this must not raise
    written = [p for p in tmp_path.rglob("*") if p.is_file() and ".ocrflow" not in p.parts]
    assert written and all(out in p.parents for p in written)


def test_long_names_can_be_written_to_a_real_disk(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    for name in (CJK_200, EMOJI, "文" * 83 + ".pdf"):  # the last is a legal 253-byte file name
        store.write_bytes(markdown_key(name), name.encode())  # no ENAMETOOLONG
    assert len(list((tmp_path / "markdown").iterdir())) == 3


def test_nfc_nfd_and_case_twins_get_distinct_names() -> None:
    sources = [_source(n) for n in (NFD, NFC, "Report.pdf", "report.pdf", "other.pdf")]
    names = dict((s.rel, n) for s, n in unique_names(sources))
    assert len({n.casefold() for n in names.values()}) == 5  # distinct even case-insensitively
    assert names["other.pdf"] == "other.pdf"  # no collision, no suffix
    for rel in (NFD, NFC, "Report.pdf", "report.pdf"):
        assert names[rel].endswith(".pdf") and "~" in names[rel]
        assert unicodedata.is_normalized("NFC", names[rel])


def test_the_same_path_under_two_inputs_gets_two_names() -> None:
    sources = [_source("x.pdf", "/a"), _source("x.pdf", "/b")]
    first, second = (n for _, n in unique_names(sources))
    assert first != second


def test_names_do_not_depend_on_input_order() -> None:
    sources = [_source(n) for n in (NFD, NFC, "A.pdf", "a.pdf", "b.pdf", "B.PDF")]
    forward = {s.uri: n for s, n in unique_names(sources)}
    backward = {s.uri: n for s, n in unique_names(reversed(sources))}
    assert forward == backward


def test_known_sources_keep_their_names_and_new_ones_avoid_them() -> None:
    old = _source("Report.pdf")
    known = {old.uri: "Report.pdf"}
    new = _source("report.pdf")
    names = {s.uri: n for s, n in unique_names([old, new], known)}
    assert names[old.uri] == "Report.pdf"  # its done work stays recognised
    assert names[new.uri].casefold() != "report.pdf"
    # The same file reached through another input root keeps the name it was planned with.
    moved = Source(old.uri, "sub/Report.pdf", "pdf", 1)
    assert [n for _, n in unique_names([moved], known)] == ["Report.pdf"]
