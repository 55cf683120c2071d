"""The access policy (``ocrflow.access``): URIs parsed not matched, local files by their real
path and kind, dataset rows' paths, start-up checks of the operator's prefixes."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from ocrflow.config import RunConfig
from ocrflow.config.access import (
    AccessPolicy,
    AccessRefused,
    check_prefixes,
    parse_url,
    read_capped,
    service_policy,
)
from ocrflow.errors import ConfigError, MissingExtra, SourceError
from ocrflow.inputs.globs import glob_match

HOST = "http://files.example:8000/docs"
ALLOWED = [f"{HOST}/a.pdf", "HTTP://FILES.example:8000/docs/a.pdf", f"{HOST}/my%20file.pdf",
           f"{HOST}/sub/", HOST, "http://files.example:8000/docs/x.pdf?sig=1"]  # fmt: skip
REFUSED = [
    f"{HOST}/%2e%2e/secret.pdf", f"{HOST}/.%2e/secret.pdf", f"{HOST}/..%2fsecret.pdf",
    f"{HOST}/%2E%2E/secret.pdf", f"{HOST}/..%5csecret.pdf", f"{HOST}/..%5Csecret.pdf",
    f"{HOST}/%252e%252e/secret.pdf", f"{HOST}/../secret.pdf", f"{HOST}/./a.pdf",
    f"{HOST}//etc/passwd", "http://files.example:8000//docs/a.pdf", f"{HOST}/..;/secret.pdf",
    f"{HOST}/\uff0e\uff0e/secret.pdf", f"{HOST}/%c0%ae%c0%ae/secret.pdf", f"{HOST}\\..\\x.pdf",
    "http://user@files.example:8000/docs/a.pdf", "http://files.example:8000@evil/docs/a.pdf",
    "http://files.example:8001/docs/a.pdf", "http://files.example/docs/a.pdf",
    "https://files.example:8000/docs/a.pdf", "http://files.example:8000/docsx/a.pdf",
    "http://files.example:8000/DOCS/a.pdf", "http://files.example.:8000/docs/a.pdf",
    "http://files.example:99999/docs/a.pdf", "http://[::1]:8000/docs/a.pdf",
    f"{HOST}/a::b.pdf", "http://[::1/docs/a.pdf", f"{HOST}/a.pdf#row=x:0:1", f"{HOST}/a.pdf ",
    f"{HOST}/a\n.pdf", f"{HOST}/a%00.pdf", f"{HOST}/a%0a.pdf", "http://files.exämple:8000/docs/a",
    "s3://bucket/docs/a.pdf", "/etc/passwd", "file:///etc/passwd", "@/etc/passwd",
]  # fmt: skip


@pytest.mark.parametrize("uri", ALLOWED)
def test_uris_under_the_prefix_are_allowed(uri: str) -> None:
    assert service_policy((HOST,)).check_uri(uri) == uri


@pytest.mark.parametrize("uri", REFUSED)
def test_encoded_dots_separators_hosts_and_ports_are_refused(uri: str) -> None:
    with pytest.raises(AccessRefused) as caught:
        service_policy((HOST,)).check_uri(uri)
    assert caught.value.reason == "path_not_allowed"


def test_parsed_urls_compare_segments_not_strings() -> None:
    prefix = parse_url("http://h/docs")
    assert parse_url("http://H:80/docs/a.pdf").under(prefix)
    assert parse_url("http://h/d%6fcs/a.pdf").under(prefix)  # an escaped letter is that letter
    assert not parse_url("http://h/docs2/a.pdf").under(prefix)
    assert not parse_url("https://h/docs/a.pdf").under(prefix)
    assert parse_url("s3://bucket/in/").segments == ("in",)


def test_the_cli_policy_trusts_its_user(tmp_path: Path) -> None:
    policy = AccessPolicy()
    assert policy.check_uri("/etc/passwd") == "/etc/passwd"
    assert policy.check_uri(f"{HOST}/%2e%2e/x") == f"{HOST}/%2e%2e/x"
    assert policy.storage_options("http://h/x") == {}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(SourceError, match="not a regular file"):
        policy.check_local_file(str(fifo))  # never opened: it would block forever
    with pytest.raises(SourceError, match="not a regular file"):
        policy.read_file("/dev/zero")


def test_local_paths_are_checked_by_their_real_path(tmp_path: Path) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    (outside / "secret.pdf").write_bytes(b"%PDF-1.4 secret")
    (allowed / "a.pdf").write_bytes(b"%PDF-1.4 a")
    (allowed / "link.pdf").symlink_to(outside / "secret.pdf")
    (allowed / "dir").symlink_to(outside)
    policy = service_policy((str(allowed),))
    assert policy.check_uri(str(allowed / "a.pdf")) == str(allowed / "a.pdf")
    assert policy.check_uri(f"file://{allowed}/a.pdf") == str(allowed / "a.pdf")
    assert policy.read_file(str(allowed / "a.pdf")) == b"%PDF-1.4 a"
    for bad in [allowed / "link.pdf", allowed / "dir" / "secret.pdf", allowed / ".." / "outside"]:
        with pytest.raises(AccessRefused):
            policy.check_uri(str(bad))
        with pytest.raises(AccessRefused):
            policy.read_file(str(bad))
        assert policy.local_real_path(str(bad)) is None
    with pytest.raises(AccessRefused, match="reads no URIs"):
        service_policy(()).check_uri(str(allowed / "a.pdf"))


def test_devices_fifos_and_folders_are_refused_inside_an_allowed_folder(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.pdf")
    (tmp_path / "zero.pdf").symlink_to("/dev/zero")
    (tmp_path / "folder.pdf").mkdir()
    policy = service_policy((str(tmp_path), "/dev"))
    for name in ["fifo.pdf", "zero.pdf", "folder.pdf"]:
        with pytest.raises(AccessRefused, match="not a regular file"):
            policy.read_file(str(tmp_path / name))


def test_the_byte_cap_reads_one_byte_past_it(tmp_path: Path) -> None:
    big = tmp_path / "big.pdf"
    big.write_bytes(b"x" * 100)
    policy = AccessPolicy(restricted=True, allow_prefixes=(str(tmp_path),), max_file_bytes=10)
    with pytest.raises(SourceError) as caught:
        policy.read_file(str(big))
    assert caught.value.reason == "too_large"

    class Endless(io.RawIOBase):
        read_count = 0

        def read(self, size: int = -1) -> bytes:
            self.read_count += max(size, 0)
            return b"\0" * size

    endless = Endless()
    with pytest.raises(SourceError, match="over the 1000-byte limit"):
        read_capped(endless, "endless", 1000)
    assert endless.read_count == 1001
    assert read_capped(io.BytesIO(b"abc"), "small", 3) == b"abc"


def test_rows_of_an_upload_name_no_file(tmp_path: Path) -> None:
    upload = tmp_path / "jobs" / "j" / "in"
    upload.mkdir(parents=True)
    (upload / "a.png").write_bytes(b"x")
    policy = service_policy((), uploads=(str(upload),))
    for path in ["/etc/passwd", "a.png", "../../../etc/passwd", str(upload / "a.png")]:
        with pytest.raises(AccessRefused, match="may not read"):
            policy.check_row_path(str(upload), str(upload), path)


def test_rows_of_an_allowed_dataset_stay_under_its_prefix(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "ds" / "img").mkdir(parents=True)
    (data / "ds" / "img" / "a.png").write_bytes(b"x")
    (tmp_path / "secret.png").write_bytes(b"s")
    (data / "ds" / "img" / "out.png").symlink_to(tmp_path / "secret.png")
    policy = service_policy((str(data),))
    ds = str(data / "ds")
    assert policy.check_row_path(ds, ds, "img/a.png") == str(data / "ds" / "img" / "a.png")
    assert policy.check_row_path(ds, ds, str(data / "ds" / "img" / "a.png")).endswith("a.png")
    for path in ["../../secret.png", "img/out.png", "/etc/passwd", "http://h/x.png", ""]:
        with pytest.raises(AccessRefused):
            policy.check_row_path(ds, ds, path)
    with pytest.raises(AccessRefused):
        policy.model_copy(update={"row_paths": False}).check_row_path(ds, ds, "img/a.png")
    remote = service_policy(("s3://bucket/data",))
    folder = "s3://bucket/data/ds"
    assert remote.check_row_path(folder, folder, "img/a.png") == f"{folder}/img/a.png"
    for path in ["../x.png", "%2e%2e/x.png", "/x.png", "s3://other/x.png", "a::b"]:
        with pytest.raises(AccessRefused):
            remote.check_row_path(folder, folder, path)


def test_restricted_http_follows_no_redirect() -> None:
    options = service_policy((HOST,)).storage_options(f"{HOST}/a.pdf")
    assert options["allow_redirects"] is False
    assert callable(options["client_kwargs"]["raise_for_status"])
    assert service_policy(("s3://b",)).storage_options("s3://b/a.pdf") == {}


def test_prefixes_are_checked_at_start_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    check_prefixes(("/srv/docs", "memory://bucket/in", HOST), str(tmp_path / "root"))
    for holding in [tmp_path, tmp_path / "root" / "jobs", f"file://{tmp_path}"]:
        with pytest.raises(ConfigError, match="service root"):
            check_prefixes((str(holding),), str(tmp_path / "root"))
    with pytest.raises(ConfigError, match="user information"):
        check_prefixes(("http://user:pw@h/docs",))
    with pytest.raises(ConfigError, match="unknown protocol"):
        check_prefixes(("nosuchscheme://h/docs",))
    # A plain install without aiohttp: the http backend cannot be imported.
    for name in [m for m in sys.modules if m == "aiohttp" or m.startswith("aiohttp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delitem(sys.modules, "fsspec.implementations.http", raising=False)
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # type: ignore[arg-type]
    with pytest.raises(MissingExtra, match=r"no fsspec backend for http://.*aiohttp") as caught:
        check_prefixes((HOST,))
    assert "pip install 'ocrflow[http]'" in str(caught.value)


def test_the_policy_is_recorded_but_not_fingerprinted() -> None:
    plain = RunConfig(inputs=("x",), output="out")
    restricted = plain.model_copy(
        update={"input": plain.input.model_copy(update={"access": service_policy((HOST,))})}
    )
    assert restricted.fingerprint() == plain.fingerprint()
    again = RunConfig.model_validate(restricted.public_dump())
    assert again.input.access == service_policy((HOST,))


def test_glob_match_is_linear_in_stars() -> None:
    assert glob_match(("**", "*.pdf"), ("a", "b", "c.pdf"))
    assert glob_match(("*", "*.pdf"), ("a", "c.pdf"))
    assert not glob_match(("*", "*.pdf"), ("a", "b", "c.pdf"))
    assert glob_match(("**",), ())
    stars = ("**",) * 40 + ("x",)
    assert not glob_match(stars, ("a",) * 40)  # would be exponential without memo
