"""Model names, and the ``vllm serve`` argv: no configured value can become an option."""

from __future__ import annotations

import argparse

import pytest

from ocrflow.engines.model_names import (
    ModelNameError,
    check_model_name,
    check_served_name,
    is_model_path,
    is_repo_id,
)
from ocrflow.engines.server_spec import ServerSpec, build_command
from ocrflow.errors import ConfigError

HOSTILE = [
    "-x",
    "--chat-template=/etc/passwd",
    "--trust-remote-code",
    "-",
    "",
    "a b",
    "a\tb",
    "a\nb",
    "a\x00b",
    "a\x1b[31m",
    "x" * 600,
]


@pytest.mark.parametrize(
    "name",
    ["allenai/olmOCR-2-7B-1025-FP8", "deepseek-ai/DeepSeek-OCR", "tiny", "Qwen/Qwen2.5-VL-7B",
     "/models/olmocr", "/models/olmocr/", "./models/x", "/srv/models/a.b_c-d"],
)  # fmt: skip
def test_repository_ids_and_paths_are_models(name: str) -> None:
    assert check_model_name(name) == name


@pytest.mark.parametrize(
    "name",
    [*HOSTILE, "../x", "a/../b", "/models/../etc/passwd", "/models/./x", "a/b/c", ".hidden/x",
     "owner/.x", "owner/-x", "a..b/c", "//etc", "~/models", "models\\x", "a:b"],
)  # fmt: skip
def test_anything_else_is_refused_as_a_model(name: str) -> None:
    with pytest.raises(ModelNameError):
        check_model_name(name)


@pytest.mark.parametrize("name", HOSTILE)
def test_served_names_never_start_with_a_dash_nor_hold_blanks(name: str) -> None:
    with pytest.raises(ModelNameError):
        check_served_name(name)


def test_served_names_may_be_free_form() -> None:
    assert check_served_name("llava:13b") == "llava:13b"
    assert check_served_name("olmocr") == "olmocr"


def test_repo_ids_and_paths_are_told_apart() -> None:
    assert is_repo_id("owner/name") and not is_model_path("owner/name")
    assert is_model_path("/m/x") and not is_repo_id("/m/x")
    assert not is_repo_id("owner/na..me") and not is_model_path("/m/../x")


def _vllm_parser() -> argparse.ArgumentParser:
    """How ``vllm serve`` reads its argv: a positional model and options, some of which
    would hand a job the server (a template file, remote code, a download folder)."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("cmd")
    parser.add_argument("model_tag", nargs="?")
    for name in ("--host", "--port", "--served-model-name", "--chat-template", "--download-dir",
                 "--allowed-local-media-path", "--model"):  # fmt: skip
        parser.add_argument(name)
    parser.add_argument("--trust-remote-code", action="store_true")
    return parser


@pytest.mark.parametrize("model", HOSTILE)
def test_a_spec_with_a_hostile_model_is_refused(model: str) -> None:
    with pytest.raises(ConfigError):
        ServerSpec(model=model)
    if model:  # an empty served name means "the model's"
        with pytest.raises(ConfigError):
            ServerSpec(model="ok/model", served_model_name=model)


@pytest.mark.parametrize("model", HOSTILE)
def test_the_argv_builder_itself_never_puts_a_dash_model_on_the_command_line(model: str) -> None:
    spec = ServerSpec(model="ok/model")
    object.__setattr__(spec, "model", model)  # as if a caller skipped the spec's check
    with pytest.raises(ModelNameError):
        build_command(spec, 8000)


def test_every_configured_value_stays_a_value() -> None:
    # The host and served name come from configuration: joined to their flags, even a
    # value that looks like an option is read as that flag's value.
    spec = ServerSpec(model="owner/model", served_model_name="name", host="127.0.0.1")
    object.__setattr__(spec, "host", "--trust-remote-code")
    object.__setattr__(spec, "served_model_name", "--chat-template=/etc/passwd")
    argv = build_command(spec, 8123)
    args = _vllm_parser().parse_args(argv[1:])
    assert args.model_tag == "owner/model" and args.model is None
    assert (args.host, args.port) == ("--trust-remote-code", "8123")
    assert args.served_model_name == "--chat-template=/etc/passwd"
    assert not args.trust_remote_code and args.chat_template is None


def test_an_ordinary_spec_reads_back_as_given() -> None:
    spec = ServerSpec(model="/models/olmocr", served_model_name="olmocr", flags=("--dtype", "x"))
    argv = build_command(spec, 9000)
    assert argv[:3] == ["vllm", "serve", "/models/olmocr"]
    args, rest = _vllm_parser().parse_known_args(argv[1:])
    assert (args.model_tag, args.served_model_name) == ("/models/olmocr", "olmocr")
    assert args.port == "9000"
    assert rest == ["--dtype", "x"]
