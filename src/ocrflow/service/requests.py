"""Reading a job request: multipart uploads or a JSON body, both into one ``JobRequest``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request

from ocrflow.config.access import service_policy
from ocrflow.errors import SourceError

from .callbacks import check_callback
from .options import JobOptions, OptionError, parse_options
from .uploads import (
    UploadError,
    check_uploaded_documents,
    multipart_boundary,
    receive_multipart,
)

MAX_JSON_BYTES = 1 << 20
JSON_KEYS = frozenset({"uris", "options", "callback_url"})


@dataclass
class JobRequest:
    """What a client asked for: uploaded files (already in the job's folder), URIs, options."""

    files: list[Path] = field(default_factory=list)
    uris: tuple[str, ...] = ()
    options: JobOptions = field(default_factory=JobOptions)
    raw_options: dict[str, Any] = field(default_factory=dict)
    callback_url: str | None = None


@dataclass(frozen=True)
class RequestLimits:
    """What the operator allows: upload size, URI prefixes, callback hosts."""

    max_upload_bytes: int
    uri_prefixes: tuple[str, ...] = ()
    callback_hosts: tuple[str, ...] = ()


async def read_job_request(request: Request, folder: Path, limits: RequestLimits) -> JobRequest:
    """Parse the body by its content type; ``UploadError`` or ``OptionError`` when bad."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/"):
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limits.max_upload_bytes + (4 << 20):
            raise UploadError(413, f"upload larger than {limits.max_upload_bytes >> 20} MB")
        boundary = multipart_boundary(content_type)
        form = await receive_multipart(request.stream(), boundary, folder, limits.max_upload_bytes)
        unknown = set(form.fields) - JSON_KEYS
        if unknown:
            raise OptionError(f"unknown form field {sorted(unknown)[0]!r}")
        body: dict[str, Any] = {
            "options": _json_field(form.fields.get("options"), "options"),
            "uris": _json_field(form.fields.get("uris"), "uris"),
            "callback_url": form.fields.get("callback_url"),
        }
        return _job_request(body, form.files, limits)
    if content_type.startswith("application/json"):
        return _job_request(await _json_body(request), [], limits)
    raise UploadError(415, "send multipart/form-data (files) or application/json (uris)")


async def _json_body(request: Request) -> dict[str, Any]:
    data = bytearray()
    async for chunk in request.stream():
        data.extend(chunk)
        if len(data) > MAX_JSON_BYTES:
            raise UploadError(413, "JSON body larger than 1 MB")
    try:
        body = json.loads(data)
    except ValueError:
        raise UploadError(400, "the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise UploadError(400, "the body must be a JSON object")
    unknown = set(body) - JSON_KEYS
    if unknown:
        raise OptionError(f"unknown field {sorted(unknown)[0]!r}")
    return body


def _json_field(text: str | None, name: str) -> Any:
    if text is None or not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise OptionError(f"invalid option {name!r}: not valid JSON") from None


def _job_request(body: dict[str, Any], files: list[Path], limits: RequestLimits) -> JobRequest:
    raw_options = body.get("options") or {}
    options = parse_options(raw_options)  # first: an unknown option is named before all else
    check_uploaded_documents(files)  # a .txt is refused by name, never dropped silently
    uris = body.get("uris") or []
    if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
        raise OptionError("invalid option 'uris': give a list of strings")
    callback = body.get("callback_url")
    if callback is not None and not isinstance(callback, str):
        raise OptionError("invalid option 'callback_url': give a string")
    return JobRequest(
        files=files,
        uris=tuple(check_uri(u, limits.uri_prefixes) for u in uris),
        options=options,
        raw_options=raw_options if isinstance(raw_options, dict) else {},
        callback_url=check_callback(callback, limits.callback_hosts),
    )


def check_uri(uri: str, prefixes: tuple[str, ...]) -> str:
    """``uri`` when the service's access policy lets a job read it (``ocrflow.access``:
    parsed and compared segment by segment; local paths by their real path, returned);
    ``OptionError`` otherwise."""
    try:
        return service_policy(prefixes).check_uri(uri)
    except SourceError as exc:
        raise OptionError(f"invalid option 'uris': {exc}") from None
