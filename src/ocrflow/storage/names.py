"""Output names: made from the inputs' relative paths, safe under OUT, short enough, unique.

A name never escapes OUT (no ``..``, no absolute or empty parts, no control characters), is
NFC, and each of its parts fits in 240 UTF-8 bytes (file systems allow 255 *bytes*; the
Markdown file adds ``.md``). Two inputs never share an output: names that would collide on a
case-insensitive disk or after normalisation get a hash of their own source as a suffix.

Input names may hold any bytes a file system allows. Python reads bytes that are not UTF-8
as lone surrogates (``caf\\udce9.pdf`` for a Latin-1 ``café.pdf``), which no encoder, JSON
writer or Parquet column accepts. They never leave ``sources``: an output name shows each
such byte as ``%E9``, a source's URI is a ``file://`` URL with the bytes percent-encoded
(``local_uri``; ``local_path`` turns it back into the path to open) and a message shows them
as ``\\xe9`` (``shown``).
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol, TypeVar
from urllib.parse import quote, unquote_to_bytes

MAX_COMPONENT_BYTES = 240
# Control characters (C0 and C1), lone surrogates and characters Windows and many sync
# tools refuse.
_UNSAFE_CHARS = re.compile('[\x00-\x1f\x7f-\x9f\ud800-\udfff<>:"|?*\\\\]')
# A byte of a file name that is not UTF-8, as Python's file system decoding keeps it.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_FILE_URL = "file://"
# What a ``file://`` URL of ours leaves as it is: the path's printable ASCII but ``%``.
_URL_SAFE = "/!$&'()*+,;=:@-._~ "
_SEPARATORS = re.compile(r"[/\\]+")
# An extension worth keeping when a name is cut: short, no spaces, no dots.
_EXTENSION = re.compile(r"\.[A-Za-z0-9_+-]{1,15}$")
_HASH_CHARS = 8


class Named(Protocol):
    """What naming needs of a source: where it is and its path relative to its input."""

    @property
    def uri(self) -> str: ...

    @property
    def rel(self) -> str: ...


SourceT = TypeVar("SourceT", bound=Named)


def safe_relpath(rel: str) -> str:
    """``rel`` made safe to join under OUT: no ``..``, no absolute parts, no control chars,
    NFC, every part at most 240 UTF-8 bytes (a cut part ends in a hash of the whole part and
    keeps its extension). Applying it to its own result changes nothing."""
    rel = unicodedata.normalize("NFC", escape_bytes(rel))
    parts = (_safe_component(p) for p in _SEPARATORS.split(rel))
    return "/".join(p for p in parts if p) or "document"


def _safe_component(part: str) -> str:
    part = _UNSAFE_CHARS.sub("_", part).strip()
    if part in {"", ".", ".."}:
        return ""
    return cap_component(part.lstrip(".") or "_")


def cap_component(name: str, limit: int = MAX_COMPONENT_BYTES) -> str:
    """``name`` when it fits in ``limit`` UTF-8 bytes; else its start, cut on a character
    boundary, then ``~`` and a hash of the whole name (two long names with the same start
    stay apart), then its extension."""
    if _size(name) <= limit:
        return name
    stem, ext = split_extension(name)
    tag = f"~{_short_hash(name)}"
    return _cut_utf8(stem, limit - _size(tag) - _size(ext)) + tag + ext


def split_extension(name: str) -> tuple[str, str]:
    """``("report", ".pdf")`` for ``report.pdf``; the extension is ``""`` when there is none
    worth keeping (long, or with spaces)."""
    match = _EXTENSION.search(name)
    if match is None or match.start() == 0:
        return name, ""
    return name[: match.start()], match.group()


def unique_names(
    sources: Iterable[SourceT], known: Mapping[str, str] | None = None
) -> Iterator[tuple[SourceT, str]]:
    """Pair each source with an output name no other source of this OUT has.

    ``known`` maps the URIs of sources an earlier run already planned to their names: those
    keep them (their work is recognised as done). A new name that equals another one once
    NFC-normalised and case-folded — NFC/NFD twins, names differing only in case, the same
    relative path under two inputs, or a name an earlier run took — gets ``~<hash of the
    source's URI>`` before its extension. Every member of such a group gets it, so the
    names do not depend on the order of the inputs.
    """
    known = known or {}
    ordered = list(sources)
    fresh = {s.uri: safe_relpath(s.rel) for s in ordered if s.uri not in known}
    taken = {_fold(name) for name in known.values()}
    counts = Counter(_fold(name) for name in fresh.values())
    clashing = {
        uri for uri, name in fresh.items() if counts[_fold(name)] > 1 or _fold(name) in taken
    }
    taken.update(_fold(name) for uri, name in fresh.items() if uri not in clashing)
    for uri in sorted(clashing):
        fresh[uri] = _tagged_unique(fresh[uri], uri, taken)
    for source in ordered:
        yield source, known.get(source.uri) or fresh[source.uri]


def _tagged_unique(name: str, uri: str, taken: set[str]) -> str:
    """``name`` with a hash of ``uri`` before its extension, not in ``taken`` (then added)."""
    tag, attempt = _short_hash(uri), 1
    candidate = _tagged(name, tag)
    while _fold(candidate) in taken:  # only on a hash collision: stay unique regardless
        attempt += 1
        candidate = _tagged(name, f"{tag}-{attempt}")
    taken.add(_fold(candidate))
    return candidate


def _tagged(name: str, tag: str) -> str:
    folder, _, leaf = name.rpartition("/")
    stem, ext = split_extension(leaf)
    leaf = cap_component(f"{stem}~{tag}{ext}")
    return f"{folder}/{leaf}" if folder else leaf


def _fold(name: str) -> str:
    """The form under which two names are one file somewhere (a case-insensitive disk, a
    tool that normalises Unicode)."""
    return unicodedata.normalize("NFC", name).casefold()


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _cut_utf8(text: str, limit: int) -> str:
    """The longest start of ``text`` that fits in ``limit`` UTF-8 bytes (whole characters)."""
    return text.encode("utf-8", "surrogatepass")[: max(limit, 0)].decode("utf-8", "ignore")


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]


# -- names that are not UTF-8 ----------------------------------------------------------------
def escape_bytes(name: str) -> str:
    """``name`` with each byte that is not UTF-8 (a surrogate from the file system's
    decoding) written ``%XX``: ``caf%E9.pdf``; readable, and two such names stay apart."""
    return _ESCAPED_BYTE.sub(lambda m: f"%{ord(m.group()) - 0xDC00:02X}", name)


def shown(text: str) -> str:
    """``text`` safe to print, log or put in JSON: bytes that are not UTF-8 as ``\\xe9``,
    any other lone surrogate as ``\\udXXX``."""
    if not _has_surrogates(text):
        return text
    data = text.encode("utf-8", "surrogateescape" if not _odd_surrogates(text) else "surrogatepass")
    return data.decode("utf-8", "backslashreplace")


def local_uri(path: str) -> str:
    """The URI a local file is known by: its path when that is valid Unicode; else a
    ``file://`` URL with the path's bytes percent-encoded (``file:///in/caf%E9.pdf``), so
    that no record, log or JSON line ever holds a lone surrogate."""
    if not _has_surrogates(path):
        return path
    return _FILE_URL + quote(os.fsencode(path), safe=_URL_SAFE)


def local_path(uri: str) -> str:
    """The path to open for a local URI (``local_uri``'s inverse); other URIs unchanged
    (``local_uri`` escapes ``#``: a dataset row's ``file://…#row=`` URI is not one)."""
    if not uri.startswith(_FILE_URL) or "#" in uri:
        return uri
    return os.fsdecode(unquote_to_bytes(uri[len(_FILE_URL) :]))


def _has_surrogates(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def _odd_surrogates(text: str) -> bool:
    """Surrogates that are not escaped bytes (surrogateescape cannot encode them)."""
    return any("\ud800" <= ch <= "\udfff" and not "\udc80" <= ch <= "\udcff" for ch in text)
