"""Streamed, size-capped multipart uploads, written straight into a job's ``in/`` folder.

The body is parsed as it arrives (python-multipart's push parser): file parts go to their
final files chunk by chunk, nothing is spooled elsewhere, and the first byte past the cap
stops the upload. The caller removes the job folder on any error, so a refused upload
leaves nothing on disk.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from ocrflow.inputs.source import DOCUMENT_SUFFIXES, sniff_kind
from ocrflow.storage.names import cap_component, split_extension

MAX_FIELD_BYTES = 1 << 20
MAX_FILES = 1000
#: Files a job reads as a dataset, and the files that may come along with one (its card,
#: its ``save_to_disk`` metadata): as ``dataset_source`` reads a folder of them.
_DATASET_SUFFIXES = (".parquet", ".arrow")
_DATASET_SIDECARS = (".json", ".md", ".txt", ".gitattributes", ".lock", ".crc")
_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]")


class UploadError(Exception):
    """The request body cannot be taken: ``status`` is the HTTP answer (400, 413, 422)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def safe_upload_name(raw: str) -> str:
    """A file name from a client made safe for one folder: its last path part only (so
    ``../../x`` and ``/etc/passwd`` lose their folders), without control characters, NUL,
    separators or leading dots, NFC-normalised and capped in length; never empty."""
    name = re.split(r"[/\\]", raw.replace("\x00", ""))[-1]
    name = unicodedata.normalize("NFC", _UNSAFE.sub("_", name)).strip().lstrip(".")
    return cap_component(name) if name.strip("_ ") else "upload"


@dataclass
class ReceivedForm:
    """What a multipart body held: the files written, and the text fields."""

    files: list[Path] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)


class _PartSink:
    """The parser's callbacks: one part at a time goes to a file or a field buffer."""

    def __init__(self, folder: Path, cap_bytes: int) -> None:
        self.folder = folder
        self.cap = cap_bytes
        self.received = 0
        self.form = ReceivedForm()
        self.ended = False
        self._header_field = b""
        self._header_value = b""
        self._disposition = b""
        self._file: BinaryIO | None = None
        self._field: bytearray | None = None
        self._field_name = ""

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": self._on_header_field,
            "on_header_value": self._on_header_value,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
            "on_end": self._end,
        }

    def _part_begin(self) -> None:
        self._disposition = b""
        self._header_field = self._header_value = b""

    def _on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_field += data[start:end]

    def _on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _header_end(self) -> None:
        if self._header_field.lower() == b"content-disposition":
            self._disposition = self._header_value
        self._header_field = self._header_value = b""

    def _headers_finished(self) -> None:
        kind, params = parse_options_header(self._disposition)
        if kind != b"form-data" or b"name" not in params:
            raise UploadError(400, "malformed multipart: a part without a form-data name")
        name = params[b"name"].decode("utf-8", "replace")
        if b"filename" in params:
            if name != "files":
                raise UploadError(422, f"unknown file field {name!r}: send files as 'files'")
            self._open_file(params[b"filename"].decode("utf-8", "replace"))
        else:
            self._field, self._field_name = bytearray(), name

    def _open_file(self, raw_name: str) -> None:
        if len(self.form.files) >= MAX_FILES:
            raise UploadError(413, f"too many files (at most {MAX_FILES} a job)")
        path = self._unique(safe_upload_name(raw_name))
        self._file = path.open("xb")
        self.form.files.append(path)

    def _unique(self, name: str) -> Path:
        stem, ext = split_extension(name)
        path, n = self.folder / name, 1
        while path.exists():
            path, n = self.folder / f"{stem}-{n}{ext}", n + 1
        return path

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._file is not None:
            self.received += end - start
            if self.received > self.cap:
                raise UploadError(413, f"upload larger than {self.cap // (1 << 20)} MB")
            self._file.write(data[start:end])
        elif self._field is not None:
            if len(self._field) + end - start > MAX_FIELD_BYTES:
                raise UploadError(413, f"form field {self._field_name!r} is too large")
            self._field.extend(data[start:end])

    def _part_end(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        elif self._field is not None:
            self.form.fields[self._field_name] = self._field.decode("utf-8", "replace")
            self._field = None

    def _end(self) -> None:
        self.ended = True

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def multipart_boundary(content_type: str) -> bytes:
    """The boundary of a ``multipart/form-data`` content type; ``UploadError`` otherwise."""
    kind, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise UploadError(400, "malformed multipart: no boundary in Content-Type")
    return boundary


async def receive_multipart(
    stream: AsyncIterator[bytes], boundary: bytes, folder: Path, cap_bytes: int
) -> ReceivedForm:
    """Parse the body from ``stream``, writing files into ``folder`` (made here)."""
    folder.mkdir(parents=True, exist_ok=True)
    sink = _PartSink(folder, cap_bytes)
    parser = MultipartParser(boundary, sink.callbacks())  # type: ignore[arg-type]
    body_cap = cap_bytes + MAX_FIELD_BYTES * 4
    seen = 0
    try:
        async for chunk in stream:
            seen += len(chunk)
            if seen > body_cap:
                raise UploadError(413, f"upload larger than {cap_bytes // (1 << 20)} MB")
            parser.write(chunk)
        parser.finalize()
    except MultipartParseError as exc:
        raise UploadError(400, f"malformed multipart: {exc}") from None
    finally:
        sink.close()
    if not sink.ended:
        raise UploadError(400, "malformed multipart: the body ended before its last boundary")
    return sink.form


def check_uploaded_documents(files: list[Path]) -> None:
    """``UploadError`` (422) naming the first uploaded file the job would not read: one that
    neither its content nor its name says is a PDF or an image (a ``.txt`` beside a PDF),
    unless it is a dataset file or comes along with one. Nothing is dropped silently."""
    dataset = any(f.suffix.lower() in _DATASET_SUFFIXES for f in files)
    for path in files:
        suffix = path.suffix.lower()
        if suffix in DOCUMENT_SUFFIXES or suffix in _DATASET_SUFFIXES:
            continue
        if dataset and suffix in _DATASET_SIDECARS:
            continue
        with path.open("rb") as handle:
            kind = sniff_kind(handle.read(1024))
        if kind not in {"pdf", "image"}:
            raise UploadError(
                422,
                f"{path.name!r} is not a PDF or an image (by its content and its name): "
                "only documents and datasets can be converted",
            )
