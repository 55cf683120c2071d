"""The job service's pure parts: names, options, URIs, tokens."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from ocrflow.config import RunConfig
from ocrflow.errors import ConfigError
from ocrflow.service.auth import TokenSet, check_bind
from ocrflow.service.options import OptionError, job_config, parse_options
from ocrflow.service.requests import check_uri
from ocrflow.service.uploads import safe_upload_name


@pytest.mark.parametrize(
    "raw, safe",
    [("../../etc/passwd", "passwd"), ("/abs/x.pdf", "x.pdf"), ("a\x00b.pdf", "ab.pdf"),
     ("..", "upload"), (".hidden.pdf", "hidden.pdf"), ("C:\\x\\y.pdf", "y.pdf"),
     ("a\nb\r.pdf", "a_b_.pdf"), ("", "upload")],
)  # fmt: skip
def test_upload_names_are_made_safe(raw: str, safe: str) -> None:
    assert safe_upload_name(raw) == safe


def test_long_upload_names_are_capped() -> None:
    name = safe_upload_name("é" * 400 + ".pdf")
    assert len(name.encode()) <= 240 and name.endswith(".pdf")


def test_unknown_option_is_named() -> None:
    with pytest.raises(OptionError, match="unknown option 'colour'"):
        parse_options({"pages": "1", "colour": "red"})
    with pytest.raises(OptionError, match="invalid option 'target_dim'"):
        parse_options({"target-dim": "big"})


def test_job_options_apply_to_the_service_config(tmp_path: Path) -> None:
    base = RunConfig(inputs=(), output=str(tmp_path))
    options = parse_options({"pages": "1-2", "text-layer": "off", "format": "markdown"})
    config = job_config(base, options, ["in"], str(tmp_path / "out"))
    assert (config.pages, config.route.text_layer, config.out.formats) == (
        "1-2",
        "off",
        ("markdown",),
    )
    with pytest.raises(OptionError, match="engine"):
        job_config(base, parse_options({"engine": "vllm"}), ["in"], "out")
    with pytest.raises(OptionError, match="format"):
        job_config(base, parse_options({"format": "docx"}), ["in"], "out")


def test_a_format_whose_extra_is_missing_is_refused_at_submission(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A None entry in sys.modules makes the import fail, as in an install without the extra.
    monkeypatch.setitem(sys.modules, "pikepdf", None)
    base = RunConfig(inputs=(), output=str(tmp_path))
    with pytest.raises(OptionError, match=r"invalid option 'formats'.*ocrflow\[pdf\]"):
        job_config(base, parse_options({"format": "markdown,pdf"}), ["in"], "out")
    config = job_config(base, parse_options({"format": "markdown,hocr"}), ["in"], "out")
    assert config.out.formats == ("markdown", "hocr")


def test_uris_must_stay_under_a_prefix(tmp_path: Path) -> None:
    allowed = tmp_path / "data"
    allowed.mkdir()
    (tmp_path / "secret").write_text("x")
    (allowed / "link").symlink_to(tmp_path / "secret")
    assert check_uri(str(allowed / "a.pdf"), (str(allowed),)) == str(allowed / "a.pdf")
    assert check_uri("s3://b/in/a.pdf", ("s3://b/in",)) == "s3://b/in/a.pdf"
    for bad in [str(allowed / ".." / "secret"), str(allowed / "link"), "s3://b/in/../x",
                "s3://b/inx/a.pdf", "/etc/passwd"]:  # fmt: skip
        with pytest.raises(OptionError):
            check_uri(bad, (str(allowed), "s3://b/in"))
    with pytest.raises(OptionError, match="reads no URIs"):
        check_uri(str(allowed / "a.pdf"), ())


def test_tokens_are_hashed_and_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OCRFLOW_API_TOKENS", "alpha, beta")
    file = tmp_path / "tokens"
    file.write_text("gamma\n\n")
    tokens = TokenSet.load(file)
    assert tokens.owner("Bearer gamma") == hashlib.sha256(b"gamma").hexdigest()
    assert tokens.owner("bearer alpha") == hashlib.sha256(b"alpha").hexdigest()
    assert tokens.owner("Bearer delta") is None and tokens.owner(None) is None
    assert tokens.owner("Basic alpha") is None
    assert "alpha" not in repr(vars(tokens))
    check_bind("0.0.0.0", tokens)  # tokens: any address


def test_without_tokens_only_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OCRFLOW_API_TOKENS", raising=False)
    tokens = TokenSet.load()
    assert tokens.owner(None) == ""
    check_bind("127.0.0.1", tokens)
    with pytest.raises(ConfigError, match="refusing"):
        check_bind("0.0.0.0", tokens)
