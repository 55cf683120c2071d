"""Who may read what: one policy decides, and every entry point asks it.

The CLI trusts its user: ``AccessPolicy()`` is unrestricted, and only refuses what no one
means to read (a device, a FIFO: reading one never ends). The job service gives each job a
restricted policy (``ocrflow serve --allow-uri-prefix``), recorded with the run so that a
joining ``ocrflow worker --root`` applies it again when it reads (a link can change
between planning and reading). Under it:

- a URI is parsed, not matched: percent-escapes are decoded before scheme, host, port and
  path segments are compared; encoded separators, dot segments (encoded or not), userinfo,
  backslashes, control characters and fsspec's ``::`` chaining are refused;
- a local file is read only when its real path (links resolved) lies under an allowed
  folder, and only when it is a regular file within the byte cap;
- a dataset row may name a file only when the dataset lies under an operator's prefix
  (never in an upload), and the file's real path must lie under that same prefix;
- HTTP(S) follows no redirect: a 3xx is an error, so no other host is ever asked.

Refusals are ``AccessRefused`` (reason ``path_not_allowed``); their messages name what was
asked, never where a link points nor whether the thing exists.
"""

from __future__ import annotations

import importlib
import os
import posixpath
import stat
import unicodedata
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field

from ocrflow.errors import ConfigError, MissingExtra, SourceError
from ocrflow.types import Reason

#: The byte cap of a file a service job reads (an uploaded file is capped by the upload).
SERVICE_MAX_FILE_BYTES = 1 << 30
_DEFAULT_PORTS = {"http": 80, "https": 443}
_HTTP = frozenset({"http", "https"})
#: Escapes refused in a URI's path: separators, ``%`` itself (double encoding) and NUL.
_BAD_ESCAPES = ("%2f", "%5c", "%25", "%00")
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_CHUNK = 1 << 20


#: The ocrflow extra that installs the fsspec backend of a URL scheme, and its package.
BACKEND_EXTRAS: dict[str, tuple[str, str]] = {
    "s3": ("s3", "s3fs"),
    "s3a": ("s3", "s3fs"),
    "http": ("http", "aiohttp"),
    "https": ("http", "aiohttp"),
}


class AccessRefused(SourceError):
    """A job named something its policy does not let it read."""

    reason = Reason.PATH_NOT_ALLOWED


@dataclass(frozen=True, slots=True)
class UrlParts:
    """A URL as compared: lower-case scheme and host, the port (the scheme's default when
    none is written), and the decoded path segments (no empty last one)."""

    scheme: str
    host: str
    port: int | None
    segments: tuple[str, ...]

    def under(self, prefix: UrlParts) -> bool:
        """Whether this URL lies at or below ``prefix``, segment by segment."""
        head = (self.scheme, self.host, self.port)
        if head != (prefix.scheme, prefix.host, prefix.port):
            return False
        return self.segments[: len(prefix.segments)] == prefix.segments


def is_url(location: str) -> bool:
    """Whether ``location`` is an fsspec URL other than a local path or ``file://``."""
    return "://" in location and not location.startswith("file://")


def parse_url(url: str) -> UrlParts:
    """``url`` as ``UrlParts``; ``AccessRefused`` when it is malformed or holds anything a
    server could read as another path (see the module docstring)."""
    _check_characters(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise AccessRefused(f"{url!r} is not a URL that can be checked") from None
    if not parts.scheme or not parts.netloc or "%" in parts.netloc:
        raise AccessRefused(f"{url!r} is not a URL that can be checked")
    if "@" in parts.netloc or not parts.netloc.isascii():
        raise AccessRefused(f"{url!r} has user information or a non-ASCII host")
    scheme = parts.scheme.lower()
    if parts.fragment or "#" in url or (parts.query and scheme not in _HTTP):
        raise AccessRefused(f"{url!r} has a fragment or a query")
    return UrlParts(
        scheme, parts.hostname or "", port or _DEFAULT_PORTS.get(scheme), _segments(url, parts.path)
    )


def _check_characters(uri: str) -> None:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in uri) or uri != uri.strip():
        raise AccessRefused("control characters or surrounding blanks in a URI")
    if "\\" in uri:
        raise AccessRefused(f"{uri!r} has a backslash")
    if "::" in uri:
        raise AccessRefused(f"{uri!r} has '::' (fsspec chaining is not accepted)")


def _segments(url: str, path: str) -> tuple[str, ...]:
    if any(bad in path.lower() for bad in _BAD_ESCAPES):
        raise AccessRefused(f"{url!r} has an encoded separator or '%'")
    try:
        decoded = unquote(path, errors="strict")
    except UnicodeDecodeError:
        raise AccessRefused(f"{url!r} has escapes that are not UTF-8") from None
    if any(ord(c) < 0x20 or ord(c) == 0x7F or c == "\\" for c in decoded):
        raise AccessRefused(f"{url!r} has control characters or backslashes once decoded")
    parts = decoded.split("/")[1:] if decoded.startswith("/") else decoded.split("/")
    if parts and parts[-1] == "":
        parts = parts[:-1]  # a folder's trailing slash
    for part in parts:
        if part == "":
            raise AccessRefused(f"{url!r} has an empty path segment ('//')")
        # Some servers read ``..;x`` as ``..`` and normalise full-width dots.
        if unicodedata.normalize("NFKC", part).split(";")[0] in {".", ".."}:
            raise AccessRefused(f"{url!r} has '.' or '..' path segments")
    return tuple(parts)


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


class AccessPolicy(BaseModel):
    """What a run may read. Recorded with the run (``InputOptions.access``); not part of
    the fingerprint: it decides what is read, never what a page says."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: ``False`` (the CLI): the user's own files are trusted; only devices are refused.
    restricted: bool = False
    #: Restricted: URL prefixes and local folders inputs may lie under.
    allow_prefixes: tuple[str, ...] = ()
    #: Restricted: folders of the job's own uploads, readable as inputs; a dataset there is
    #: read from its bytes only (a row naming a file is refused).
    upload_folders: tuple[str, ...] = ()
    #: Restricted: whether rows of a dataset under an allowed prefix may name files.
    row_paths: bool = True
    #: The largest file read for one document (``None``: no cap).
    max_file_bytes: int | None = Field(None, ge=1)

    # -- URIs ------------------------------------------------------------------------------
    def check_uri(self, uri: str) -> str:
        """``uri`` as it will be read when the policy allows it (a local path: its real
        path); ``AccessRefused`` otherwise. Unrestricted: ``uri`` unchanged."""
        if not self.restricted:
            return uri
        if not self.allow_prefixes and not self.upload_folders:
            raise AccessRefused("this service reads no URIs (--allow-uri-prefix)")
        _check_characters(uri)
        if is_url(uri):
            if self._url_prefix(uri) is None:
                raise AccessRefused(f"{uri!r} is outside the allowed prefixes")
            return uri
        return self._local_inside(_local_path(uri), uri)

    def _url_prefix(self, uri: str) -> str | None:
        """The allowed URL prefix ``uri`` lies under, or ``None``."""
        target = parse_url(uri)
        for prefix in self.allow_prefixes:
            if is_url(prefix) and target.under(parse_url(prefix)):
                return prefix
        return None

    # -- local files -----------------------------------------------------------------------
    def _local_roots(self) -> list[str]:
        prefixes = [_local_path(p) for p in self.allow_prefixes if not is_url(p)]
        return [os.path.realpath(p) for p in (*prefixes, *self.upload_folders)]

    def _local_inside(self, path: str, shown: str) -> str:
        real = os.path.realpath(path)
        if not any(_inside(real, root) for root in self._local_roots()):
            raise AccessRefused(f"{shown!r} is outside the allowed prefixes")
        return real

    def local_real_path(self, path: str) -> str | None:
        """Restricted: ``path``'s real path when it lies under an allowed folder, else
        ``None`` (nothing of the target is looked at). Unrestricted: ``path``."""
        if not self.restricted:
            return path
        try:
            return self._local_inside(path, path)
        except AccessRefused:
            return None

    def check_local_file(self, path: str, *, capped: bool = True) -> str:
        """The path to open for the local file ``path``: restricted, its real path when
        that lies under an allowed folder. It must be a regular file (a device or FIFO
        would be read forever) of at most ``max_file_bytes`` when ``capped``."""
        real = self._local_inside(path, path) if self.restricted else path
        try:
            info = os.stat(real)
        except OSError as exc:
            raise _unreadable(path, exc) from exc
        if not stat.S_ISREG(info.st_mode):
            if self.restricted:
                raise AccessRefused(f"{path} is not a regular file")
            raise SourceError(f"{path} is not a regular file", reason=Reason.NOT_A_FILE)
        if capped:
            check_size(path, info.st_size, self.max_file_bytes)
        return real

    def read_file(self, path: str) -> bytes:
        """A local file's bytes under the policy: a regular file, opened without following
        a last link, at most ``max_file_bytes`` read (one more says it is too large)."""
        real = self.check_local_file(path)
        try:
            fd = os.open(real, _OPEN_FLAGS)
        except OSError as exc:
            raise _unreadable(path, exc) from exc
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced since the check
                raise AccessRefused(f"{path} is not a regular file")
            return read_capped(handle, path, self.max_file_bytes)

    # -- dataset rows ----------------------------------------------------------------------
    def check_row_path(self, dataset: str, folder: str, path: str) -> str:
        """Where the file a dataset row names lies: ``path`` (relative ones joined to
        ``folder``, the row's shard folder, a local path or URL). Restricted: refused
        unless rows may name files, the dataset lies under an allowed prefix (not an upload)
        and the file's real path (or URL) under that same prefix."""
        joined = path if "://" in path or posixpath.isabs(path) else _join(folder, path)
        if not self.restricted:
            return joined
        refused = AccessRefused("the row names a file this job may not read")
        if not self.row_paths or "://" in path or not path or not path.isprintable():
            raise refused
        if is_url(dataset):
            return self._remote_row_path(dataset, path, joined, refused)
        real_dataset = os.path.realpath(_local_path(dataset))
        if any(_inside(real_dataset, os.path.realpath(u)) for u in self.upload_folders):
            raise refused  # an upload is read from its bytes only
        local = [os.path.realpath(_local_path(p)) for p in self.allow_prefixes if not is_url(p)]
        for prefix in local:
            if _inside(real_dataset, prefix):
                real = os.path.realpath(joined)
                if _inside(real, prefix):
                    return real
        raise refused

    def _remote_row_path(self, dataset: str, path: str, joined: str, refused: AccessRefused) -> str:
        if path.startswith("/"):
            raise refused
        try:
            prefix = self._url_prefix(dataset)
            if prefix is None or not parse_url(joined).under(parse_url(prefix)):
                raise refused
        except AccessRefused:
            raise refused from None
        return joined

    # -- fsspec ----------------------------------------------------------------------------
    def storage_options(self, url: str) -> dict[str, Any]:
        """fsspec options for reading ``url``: restricted HTTP(S) follows no redirect (it
        could lead to any host) and takes a 3xx answer as an error."""
        if self.restricted and url.split("://", 1)[0].lower() in _HTTP:
            return {"allow_redirects": False, "client_kwargs": {"raise_for_status": _no_redirect}}
        return {}


async def _no_redirect(response: Any) -> None:
    """aiohttp's response check for restricted reads: a redirect is not followed."""
    if 300 <= int(response.status) < 400:
        raise PermissionError(f"HTTP {response.status}: redirects are not followed")


def _unreadable(path: str, exc: OSError) -> SourceError:
    return SourceError(f"cannot read {path}: {exc.strerror}", reason=Reason.UNREADABLE)


def _local_path(location: str) -> str:
    return location.removeprefix("file://")


def _join(folder: str, path: str) -> str:
    return f"{folder.rstrip('/')}/{path}" if folder else path


def check_size(shown: str, size: int, max_bytes: int | None) -> None:
    """``SourceError`` (reason ``too_large``) when ``size`` is over ``max_bytes``."""
    if max_bytes is not None and size > max_bytes:
        raise SourceError(
            f"{shown} is {size} bytes, over the {max_bytes}-byte limit", reason=Reason.TOO_LARGE
        )


def read_capped(handle: Any, shown: str, max_bytes: int | None) -> bytes:
    """Everything ``handle`` holds, reading at most ``max_bytes + 1`` bytes: one more than
    the cap says the file is too large, whatever size it claimed."""
    if max_bytes is None:
        return bytes(handle.read())
    data = bytearray()
    while len(data) <= max_bytes:
        block = handle.read(min(_CHUNK, max_bytes + 1 - len(data)))
        if not block:
            return bytes(data)
        data.extend(block)
    check_size(shown, len(data), max_bytes)
    return bytes(data)


def service_policy(prefixes: tuple[str, ...], uploads: tuple[str, ...] = ()) -> AccessPolicy:
    """The policy of a service job: restricted to the operator's prefixes and the job's
    own upload folder, with the service's byte cap."""
    return AccessPolicy(
        restricted=True,
        allow_prefixes=prefixes,
        upload_folders=uploads,
        max_file_bytes=SERVICE_MAX_FILE_BYTES,
    )


def _check_local_prefix(prefix: str, root: str | None) -> None:
    if root is None:
        return
    real, real_root = os.path.realpath(_local_path(prefix)), os.path.realpath(root)
    if _inside(real_root, real) or _inside(real, real_root):
        raise ConfigError(
            f"--allow-uri-prefix {prefix}: it holds the service root {root} or lies in it "
            "(jobs could read each other's files)"
        )


def _import_backend(scheme: str) -> None:
    """Import the fsspec backend of ``scheme`` (ImportError when it is not installed; fsspec
    would only say so at the first job); ``ValueError`` for an unknown scheme."""
    import fsspec
    from fsspec.registry import known_implementations

    if scheme in known_implementations:
        importlib.import_module(known_implementations[scheme]["class"].rsplit(".", 1)[0])
    else:
        fsspec.get_filesystem_class(scheme)


def check_prefixes(prefixes: tuple[str, ...], root: str | None = None) -> None:
    """Check the operator's ``--allow-uri-prefix`` values at start-up: each URL must parse
    as the policy parses URIs and its scheme must have an installed fsspec backend (else
    every job naming it would fail); a local one must not hold the service's ``root`` nor
    lie in it (a job could read the other jobs' files). ``ConfigError`` says which."""
    for prefix in prefixes:
        if not is_url(prefix):
            _check_local_prefix(prefix, root)
            continue
        try:
            scheme = parse_url(prefix).scheme
        except AccessRefused as exc:
            raise ConfigError(f"--allow-uri-prefix {prefix}: {exc}") from None
        try:
            _import_backend(scheme)
        except ImportError:
            feature = f"--allow-uri-prefix {prefix} (no fsspec backend for {scheme}://)"
            if scheme in BACKEND_EXTRAS:
                raise MissingExtra(feature, *BACKEND_EXTRAS[scheme]) from None
            package = "gcsfs" if scheme in {"gs", "gcs"} else f"the fsspec backend for {scheme}"
            raise ConfigError(f"{feature}: pip install {package}") from None
        except ValueError:
            raise ConfigError(f"--allow-uri-prefix {prefix}: unknown protocol {scheme}") from None
