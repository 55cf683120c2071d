"""What ``ocrflow run`` checks before the first page: settings it cannot work with are
refused at once (exit 2), naming the flag, instead of failing every document one by one
or stopping after the work. The inputs themselves are checked when they are expanded."""

from __future__ import annotations

import shutil
import subprocess

from ocrflow.config import EngineOptions, RunConfig
from ocrflow.errors import ConfigError, require
from ocrflow.sinks import validate_formats
from ocrflow.storage.names import shown

_LIST_TIMEOUT_S = 30.0


def check_before_start(config: RunConfig) -> None:
    """``ConfigError`` naming the flag when the run could not convert a page as asked."""
    validate_formats(config.out.formats)  # the sinks know which formats exist
    check_tesseract_languages(config.engine)
    check_embedded_backend(config.engine)
    check_describe_stage(config)


def check_embedded_backend(engine: EngineOptions) -> None:
    """``--embedded-backend openvino`` needs the ``openvino`` extra."""
    if engine.kind == "embedded" and engine.backend == "openvino":
        require("openvino", extra="openvino", feature="--embedded-backend openvino")


def check_tesseract_languages(engine: EngineOptions, command: str = "tesseract") -> None:
    """``--engine tesseract``: every language of ``--languages`` must be installed (``eng``
    from ``tesseract-ocr``, others from ``tesseract-ocr-LANG`` packs)."""
    if engine.kind != "tesseract":
        return
    installed = tesseract_languages(command)
    missing = [lang for lang in engine.languages.split("+") if lang not in installed]
    if missing:
        raise ConfigError(
            f"--languages {shown(engine.languages)}: Tesseract has no "
            f"{', '.join(map(shown, missing))} (installed: {', '.join(sorted(installed))}; "
            f"Debian: apt-get install tesseract-ocr-{shown(missing[0]).lower()})"
        )


def tesseract_languages(command: str = "tesseract") -> set[str]:
    """The languages ``tesseract --list-langs`` names; ``ConfigError`` when it cannot run."""
    if shutil.which(command) is None:
        raise ConfigError(
            "--engine tesseract: the tesseract command is not installed "
            "(apt-get install tesseract-ocr)"
        )
    try:
        done = subprocess.run(
            [command, "--list-langs"],
            capture_output=True,
            text=True,
            timeout=_LIST_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"--engine tesseract: cannot list its languages: {exc}") from None
    # The first line is a header ("List of available languages in ... (3):").
    lines = (done.stdout or "").splitlines()[1:]
    return {line.strip() for line in lines if line.strip()}


def check_describe_stage(config: RunConfig) -> None:
    """``--stages …,describe``: the describe stage needs a VLM (``--describe-model`` or
    ``--model``) and a server for it (``--describe-server``, ``--server`` or
    ``--engine vllm``), known before extract converts anything."""
    options = config.stages
    if "describe" not in options.stages:
        return
    if not (options.describe_model or config.engine.model):
        raise ConfigError(
            "--stages describe needs a VLM to describe figures: give --describe-model (or --model)"
        )
    managed = config.engine.kind == "vllm"  # ocrflow starts the describe model too
    if not (options.describe_servers or config.engine.servers or managed):
        raise ConfigError(
            "--stages describe needs a server for its model: give --describe-server URL "
            "(or --server URL)"
        )
