"""A job's options: the names of ``ocrflow run``'s options, checked, turned into a RunConfig.

Only options that change what is read and written per job are accepted; engines, servers
and keys are the service's (``ocrflow serve`` flags), so a client cannot point the service
at another server or start a vLLM. An unknown name is refused with the name in the error.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ocrflow.config import RunConfig
from ocrflow.errors import ConfigError, OcrflowError
from ocrflow.sinks import validate_formats
from ocrflow.stages.commands import parse_stages

#: Engines a job may choose besides the service's own (both run on this machine's CPU).
CPU_ENGINES = frozenset({"embedded", "tesseract"})


class JobOptions(BaseModel):
    """What a client may set per job (``ocrflow run`` names; ``-`` or ``_`` both work)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pages: str | None = None
    text_layer: str | None = None
    engine: str | None = None
    recipe: str | None = None
    model: str | None = None
    target_dim: int | None = None
    page_separator: bool | None = None
    format: str | list[str] | None = None
    languages: str | None = None
    recipe_option: dict[str, Any] | None = None
    max_page_error_rate: float | None = None
    dataset_column: str | None = None
    dataset_id_column: str | None = None
    stages: str | None = Field(None, description="extract only (describe/assemble: not yet)")


class OptionError(ConfigError):
    """A job option is unknown or has a bad value; the message names it."""


def parse_options(raw: object) -> JobOptions:
    """``raw`` (a JSON object) as ``JobOptions``; ``OptionError`` names what is wrong."""
    if raw is None:
        return JobOptions()
    if not isinstance(raw, dict):
        raise OptionError("options must be a JSON object")
    data = {str(k).replace("-", "_"): v for k, v in raw.items()}
    try:
        return JobOptions.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(p) for p in first["loc"])
        if first["type"] == "extra_forbidden":
            raise OptionError(f"unknown option {name!r}") from None
        raise OptionError(f"invalid option {name!r}: {first['msg']}") from None


def job_config(base: RunConfig, options: JobOptions, inputs: list[str], output: str) -> RunConfig:
    """The job's run configuration: the service's, with the job's options applied."""
    data = base.model_dump()
    data.update(inputs=tuple(inputs), output=output)
    if options.pages is not None:
        data["pages"] = options.pages
    _apply_engine(data["engine"], options, base.engine.kind)
    if options.text_layer is not None:
        data["route"]["text_layer"] = options.text_layer
    if options.target_dim is not None:
        data["render"]["target_dim"] = options.target_dim
    if options.page_separator is not None:
        data["out"]["page_separator"] = options.page_separator
    if options.dataset_column is not None:
        data["input"]["dataset_column"] = options.dataset_column
    if options.dataset_id_column is not None:
        data["input"]["dataset_id_column"] = options.dataset_id_column
    try:
        _apply_outputs(data, options)
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(p) for p in first["loc"])
        raise OptionError(f"invalid option {name!r}: {first['msg']}") from None
    except OcrflowError as exc:
        raise OptionError(str(exc)) from None


def _apply_engine(engine: dict[str, Any], options: JobOptions, service_kind: str) -> None:
    if options.engine is not None:
        if options.engine not in CPU_ENGINES | {service_kind}:
            allowed = ", ".join(sorted(CPU_ENGINES | {service_kind}))
            raise OptionError(f"invalid option 'engine': this service offers {allowed}")
        engine["kind"] = options.engine
    for name in ("recipe", "model", "languages", "max_page_error_rate"):
        value = getattr(options, name)
        if value is not None:
            engine[name] = value
    if options.recipe_option is not None:
        engine["recipe_options"] = dict(options.recipe_option)


def _apply_outputs(data: dict[str, Any], options: JobOptions) -> None:
    if options.format is not None:
        names = options.format.split(",") if isinstance(options.format, str) else options.format
        data["out"]["formats"] = validate_formats(names)
    if options.stages is not None:
        stages = parse_stages(options.stages)
        if stages != ("extract",):
            raise OptionError("invalid option 'stages': the service runs extract only for now")
        data["stages"]["stages"] = stages
