"""A job's options: the names of ``ocrflow run``'s options, checked, turned into a RunConfig.

Only options that change what is read and written per job are accepted; engines, servers,
models, recipes and keys are the service's (``ocrflow serve`` flags), so a client cannot
point the service at another server or choose what a vLLM runs. Within that, a job may
pick a model the operator listed (``--allow-model``), the recipe of the service or of its
model, and a few recipe options that change what is asked of the model, never what the
server runs or reads (``JobRecipeOptions``). A refusal names the option.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

from ocrflow.config import EngineOptions, RunConfig
from ocrflow.config.builder import build_run_config
from ocrflow.engines.model_names import MAX_NAME_CHARS, check_model_name, check_served_name
from ocrflow.errors import ConfigError, MissingExtra, OcrflowError
from ocrflow.sinks import require_format_extras, validate_formats

#: Engines a job may choose besides the service's own (both run on this machine's CPU).
CPU_ENGINES = frozenset({"embedded", "tesseract"})
#: Engines that read pages with a model and a recipe.
VLM_ENGINES = frozenset({"openai", "vllm"})
#: The most tokens a job may ask for a page (every recipe's default is below it).
MAX_JOB_TOKENS = 32768
MAX_PROMPT_CHARS = 8000


class JobRecipeOptions(BaseModel):
    """The recipe options a job may set: what is asked of the model. Everything else a
    recipe takes (``server_flags``, ``gpu_preset``, ``target_dim``, ``model``, ...) is the
    operator's (``ocrflow serve --recipe-option``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: StrictInt | None = Field(None, ge=1, le=MAX_JOB_TOKENS)
    prompt: StrictStr | None = Field(None, min_length=1, max_length=MAX_PROMPT_CHARS)
    temperatures: tuple[Annotated[StrictFloat, Field(ge=0.0, le=2.0)], ...] | None = Field(
        None, min_length=1, max_length=10
    )
    mode: StrictStr | None = Field(None, max_length=32)
    table_format: StrictStr | None = Field(None, max_length=32)
    extract_figures: StrictBool | None = None

    def as_dict(self) -> dict[str, Any]:
        """The options the job set, as keyword arguments of a recipe."""
        return self.model_dump(exclude_none=True)


class JobOptions(BaseModel):
    """What a client may set per job (``ocrflow run`` names; ``-`` or ``_`` both work).
    Types are strict: ``true`` is no number and ``"1"`` no boolean (the OpenAPI says what
    this model takes, and takes nothing else)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pages: StrictStr | None = None
    text_layer: StrictStr | None = None
    engine: StrictStr | None = None
    recipe: StrictStr | None = Field(None, max_length=64)
    model: StrictStr | None = Field(None, max_length=MAX_NAME_CHARS)
    target_dim: StrictInt | None = None
    dpi: StrictInt | None = Field(None, ge=36, le=1200)
    page_separator: StrictBool | None = None
    format: StrictStr | list[StrictStr] | None = None
    chunk_tokens: StrictInt | None = Field(None, ge=16, le=65536)
    drop_headers_footers: StrictBool | None = None
    #: What ``format: pdf`` writes, as ``--pdfa``, ``--rotate-pages``, ``--deskew``.
    pdfa: StrictBool | None = None
    rotate_pages: StrictBool | None = None
    deskew: StrictBool | None = None
    #: Tesseract's ``-l`` value ("eng+deu"), checked here so a bad one is a 422, not a
    #: job whose engine cannot open.
    languages: StrictStr | None = Field(
        None, max_length=200, pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$"
    )
    recipe_option: JobRecipeOptions | None = None
    max_page_error_rate: StrictFloat | None = None
    dataset_column: StrictStr | None = None
    dataset_id_column: StrictStr | None = None
    stages: StrictStr | None = Field(None, description="extract only (describe/assemble: not yet)")

    @field_validator("model")
    @classmethod
    def _model_name(cls, value: str | None) -> str | None:
        try:
            return None if value is None else check_served_name(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None


#: Job options that are ``ocrflow run`` options under the same name, passed as they are.
_RUN_OPTIONS = {
    "pages", "text_layer", "target_dim", "dpi", "page_separator", "languages",
    "max_page_error_rate", "dataset_column", "dataset_id_column", "chunk_tokens",
    "drop_headers_footers", "pdfa", "rotate_pages", "deskew",
}  # fmt: skip


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
        if first["type"] == "extra_forbidden" and first["loc"][0] == "recipe_option":
            allowed = ", ".join(JobRecipeOptions.model_fields)
            raise OptionError(
                f"option {name!r} is not allowed per job (the operator's); "
                f"a job's recipe_option may set {allowed}"
            ) from None
        if first["type"] == "extra_forbidden":
            raise OptionError(f"unknown option {name!r}") from None
        message = first["msg"].removeprefix("Value error, ")
        raise OptionError(f"invalid option {name!r}: {message}") from None


def job_config(
    base: RunConfig,
    options: JobOptions,
    inputs: list[str],
    output: str,
    *,
    allowed_models: Sequence[str] = (),
) -> RunConfig:
    """The job's run configuration: the service's, with the job's options applied.

    ``allowed_models``: the models a job may choose besides the service's own
    (``ocrflow serve --allow-model``).
    """
    engine = _job_engine(options, base.engine, allowed_models)
    try:
        config = build_run_config(
            inputs,
            output,
            base=base.model_copy(update={"engine": engine}),
            **options.model_dump(include=_RUN_OPTIONS),
            output_format=options.format,
            stages=options.stages,
        )
        _check_outputs(config)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(p) for p in first["loc"])
        raise OptionError(f"invalid option {name!r}: {first['msg']}") from None
    except OcrflowError as exc:
        raise OptionError(str(exc)) from None
    _check_recipe(config.engine)
    return config


def check_service_engine(engine: EngineOptions, allowed: Sequence[str]) -> tuple[str, ...]:
    """The operator's ``--model`` and ``--allow-model`` names, checked at start-up (a model
    vLLM loads must be a repository id or a path; ``model_names``), and the service's recipe
    built once; ``ConfigError`` says what is wrong. Returns the allowed models, deduplicated."""
    if engine.kind not in VLM_ENGINES:
        if allowed:
            raise ConfigError("--allow-model needs --engine openai or vllm")
        return ()
    if not engine.model:
        raise ConfigError(f"--engine {engine.kind} needs --model")
    check = check_model_name if engine.kind == "vllm" else check_served_name
    for flag, name in [("--model", engine.model), *(("--allow-model", m) for m in allowed)]:
        try:
            check(name)
        except ConfigError as exc:
            raise ConfigError(f"{flag}: {exc}") from None
    try:
        _check_recipe(engine)
    except OptionError as exc:
        raise ConfigError(f"--recipe-option: {exc}") from None
    return tuple(dict.fromkeys(m for m in allowed if m != engine.model))


def _job_engine(
    options: JobOptions, service: EngineOptions, allowed: Sequence[str]
) -> EngineOptions:
    """The service's engine with the job's choices (validated with the whole configuration)."""
    engine: dict[str, Any] = {}
    if options.engine is not None:
        if options.engine not in CPU_ENGINES | {service.kind}:
            offered = ", ".join(sorted(CPU_ENGINES | {service.kind}))
            raise OptionError(f"invalid option 'engine': this service offers {offered}")
        engine["kind"] = options.engine
    model = _job_model(options.model, service, allowed)
    recipe = _job_recipe(options.recipe, service, model)
    if model != service.model or recipe != _recipe_name(service.recipe, service.model):
        # The recipe options the operator set are the service recipe's, its served name
        # the service model's: another model or recipe starts from the recipe's defaults.
        engine.update(model=model, recipe=recipe, recipe_options={})
    if model != service.model:
        engine["served_model_name"] = None
    if options.recipe_option is not None:
        recipe_options = engine.get("recipe_options", service.recipe_options)
        engine["recipe_options"] = {**recipe_options, **options.recipe_option.as_dict()}
    return service.model_copy(update=engine)


def _job_model(model: str | None, service: EngineOptions, allowed: Sequence[str]) -> str | None:
    """The model the job runs with: the service's, or one the operator allowed."""
    if model is None or model == service.model:
        return service.model
    if model not in allowed:
        offered = ", ".join(m for m in (service.model, *allowed) if m) or "no choice of model"
        raise OptionError(f"invalid option 'model': {model!r} is not offered (offered: {offered})")
    return model


def _job_recipe(recipe: str | None, service: EngineOptions, model: str | None) -> str | None:
    """The recipe the job runs with: the service's; for another model the one its name
    implies, unless the job names the service's."""
    own = _recipe_name(service.recipe, service.model)
    implied = own if model == service.model else _recipe_name(None, model)
    if recipe is None:
        return implied
    offered = {name for name in (own, implied) if name is not None}
    if recipe not in offered:
        names = ", ".join(sorted(offered)) or "no choice of recipe"
        raise OptionError(f"invalid option 'recipe': {recipe!r} is not offered ({names})")
    return recipe


def _recipe_name(recipe: str | None, model: str | None) -> str | None:
    """The recipe a VLM engine would use: the one named, else the one its model implies."""
    if recipe or not model:
        return recipe
    from ocrflow.recipes.registry import recipe_name_for_model

    return recipe_name_for_model(model)


def _check_recipe(engine: EngineOptions) -> None:
    """Build the job's recipe now, so that an option it refuses is a 422, not a job whose
    engine cannot open."""
    if engine.kind not in VLM_ENGINES or not engine.model:
        return
    from ocrflow.recipes.registry import recipe_for_model

    try:
        recipe_for_model(engine.model, engine.recipe, guided=engine.guided, **engine.recipe_options)
    except ConfigError as exc:
        raise OptionError(f"invalid option 'recipe_option': {exc}") from None


def _check_outputs(config: RunConfig) -> None:
    """The formats must have sinks, installed; the service runs no later stage yet."""
    validate_formats(config.out.formats)
    try:
        require_format_extras(config.out.formats)
    except MissingExtra as exc:
        raise OptionError(f"invalid option 'formats': {exc}") from None
    if config.stages.stages != ("extract",):
        raise OptionError("invalid option 'stages': the service runs extract only for now")
