"""The one builder of the run configuration from options. Every entry point uses it:
``ocrflow run`` and the Python API (``ocrflow.run``, ``ocrflow.convert``), ``ocrflow serve``
(its engine flags), a job of the service (its options over the service's configuration), and
a process that joins a run (``ocrflow worker``, ``retry``, a service slot: the recorded
configuration with this process's secrets and overrides).

Options have the Python names of ``ocrflow run``'s flags (``--text-layer`` is
``text_layer``, ``--server`` is ``server``, ``--format`` is ``output_format``). An option
left out, or given as ``None``, keeps the base configuration's value, and without a base the
default of ``ocrflow.config``: defaults are stated once, there.

The environment is never copied into the configuration (it is recorded with the run, and a
process joining it may run elsewhere): ``ocrflow.config.environment`` reads it where a value
is used. The API key an engine sends is, for every command (``run``, ``worker``, ``retry``,
``serve``, ``worker --root``, ``describe``), the first of: the ``api_key`` option
(``--api-key``), ``OCRFLOW_API_KEY``, ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import SecretStr

from ocrflow.config import RunConfig, parse_stages
from ocrflow.errors import ConfigError

Convert = Callable[[Any], Any]


def _words(value: str | Iterable[str], sep: str = ",") -> tuple[str, ...]:
    """``"a,b"`` or ``["a", "b"]`` as ``("a", "b")``, blanks dropped."""
    items = value.split(sep) if isinstance(value, str) else value
    return tuple(str(item).strip() for item in items if str(item).strip())


def _many(value: str | Iterable[str]) -> tuple[str, ...]:
    """One value or several (a repeatable flag)."""
    return (value,) if isinstance(value, str) else tuple(value)


def _argv(value: str | Iterable[str]) -> tuple[str, ...]:
    """Shell words: ``"--a 1"`` or ``["--a 1", "--b"]`` as ``("--a", "1", "--b")``."""
    return tuple(word for arg in _many(value) for word in shlex.split(arg))


def _formats(value: str | Iterable[str]) -> tuple[str, ...]:
    """Format names, lower case, each once. Which names exist is the sinks' business: they
    are checked before a run starts (``check_before_start``) and when a job is submitted."""
    return tuple(dict.fromkeys(word.lower() for word in _words(value)))


def key_values(pairs: str | Iterable[str] | Mapping[str, Any]) -> dict[str, Any]:
    """``KEY=VALUE`` strings (or a mapping) as a dict; values are read as JSON when they
    parse (numbers, booleans), else kept as text."""
    if isinstance(pairs, Mapping):
        return dict(pairs)
    options: dict[str, Any] = {}
    for pair in _many(pairs):
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"expected KEY=VALUE, got {pair!r}")
        try:
            options[key.strip()] = json.loads(raw)
        except ValueError:
            options[key.strip()] = raw
    return options


def _same(value: Any) -> Any:
    return value


#: Option (``ocrflow run``'s flag, Python name) -> (section of ``RunConfig``, its field,
#: how the value is read). Section ``""``: a field of ``RunConfig`` itself.
_OPTIONS: dict[str, tuple[str, str, Convert]] = {
    "pages": ("", "pages", _same),
    "target_dim": ("render", "target_dim", _same),
    "dpi": ("render", "dpi", _same),
    "page_timeout": ("render", "page_timeout_s", _same),
    "max_image_pixels": ("render", "max_image_pixels", _same),
    "max_pixels": ("render", "max_pixels", _same),
    "render_memory": ("render", "worker_memory_mb", _same),
    "workers": ("render", "workers", _same),
    "text_layer": ("route", "text_layer", _same),
    "engine": ("engine", "kind", _same),
    "threads": ("engine", "threads", _same),
    "parallel": ("engine", "parallel", _same),
    "languages": ("engine", "languages", _same),
    "embedded_backend": ("engine", "backend", _same),
    "embedded_charset": ("engine", "charset", _same),
    "model": ("engine", "model", _same),
    "served_model_name": ("engine", "served_model_name", _same),
    "recipe": ("engine", "recipe", _same),
    "server": ("engine", "servers", _many),
    "api_key": ("engine", "api_key", SecretStr),
    "max_concurrency": ("engine", "max_concurrency", _same),
    "max_page_error_rate": ("engine", "max_page_error_rate", _same),
    "page_deadline": ("engine", "page_deadline_s", _same),
    "request_timeout": ("engine", "request_timeout_s", _same),
    "guided": ("engine", "guided", _same),
    "logprobs": ("engine", "logprobs", _same),
    "recipe_option": ("engine", "recipe_options", key_values),
    "gpus": ("engine", "gpus", _words),
    "vllm_arg": ("engine", "server_flags", _argv),
    "vllm_command": ("engine", "vllm_command", _argv),
    "ready_timeout": ("engine", "ready_timeout_s", _same),
    "unreachable_timeout": ("engine", "unreachable_timeout_s", _same),
    "fail_after": ("engine", "fail_after_s", _same),
    "preset": ("engine", "preset", _same),
    "clean": ("passes", "clean", _same),
    "roi_labels": ("passes", "roi_labels", _words),
    "retry_large_cap": ("passes", "retry_large_cap", _same),
    "page_separator": ("out", "page_separator", _same),
    "output_format": ("out", "formats", _formats),
    "chunk_tokens": ("out", "chunk_tokens", _same),
    "drop_headers_footers": ("out", "drop_headers_footers", _same),
    "sidecar": ("out", "sidecar", _same),
    "pdfa": ("out", "pdfa", _same),
    "rotate_pages": ("out", "rotate_pages", _same),
    "deskew": ("out", "deskew", _same),
    "split_pages": ("scale", "split_pages", _same),
    "lease_ttl": ("scale", "lease_ttl_s", _same),
    "stages": ("stages", "stages", lambda v: parse_stages(",".join(_words(v)))),
    "describe_model": ("stages", "describe_model", _same),
    "describe_server": ("stages", "describe_servers", _many),
    "dataset_column": ("input", "dataset_column", _same),
    "dataset_id_column": ("input", "dataset_id_column", _same),
}
#: ``password``: one or several; ``passwords``: a file of them, one a line.
_SECRETS = frozenset({"password", "passwords"})
#: OCRmyPDF's flags, each a ``--text-layer`` mode under the name its users type.
TEXT_LAYER_ALIASES = MappingProxyType({"skip_text": "auto", "force_ocr": "off", "redo_ocr": "redo"})
#: Every option ``build_run_config`` takes.
OPTION_NAMES = frozenset(_OPTIONS) | _SECRETS | frozenset(TEXT_LAYER_ALIASES)


class UnknownOption(ConfigError, TypeError):
    """An option ``ocrflow run`` does not have (a ``TypeError`` too, as for a bad keyword)."""


def build_run_config(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    base: RunConfig | None = None,
    **options: Any,
) -> RunConfig:
    """The ``RunConfig`` of ``ocrflow run INPUTS -o OUTPUT`` with ``options`` (Python names
    of its flags; ``password``: one or several, ``passwords``: a file of them, one a line).
    Options left out or ``None`` keep ``base``'s values, or without one the configuration's
    defaults. Raises ``UnknownOption`` naming an option ``ocrflow run`` lacks,
    ``ConfigError`` for a value that cannot be read, pydantic's ``ValidationError`` for one
    the configuration refuses (callers name the flag or option from its location)."""
    check_option_names(options, OPTION_NAMES)
    options = _text_layer_alias(options)
    data: dict[str, Any] = base.model_dump() if base is not None else {}
    for name, value in options.items():
        if value is None or name in _SECRETS:
            continue
        section, field, read = _OPTIONS[name]
        fields = data.setdefault(section, {}) if section else data
        fields[field] = read(value)
    if options.get("password") is not None or options.get("passwords") is not None:
        data["passwords"] = _passwords(options.get("password"), options.get("passwords"))
    data.update(inputs=tuple(os.fspath(i) for i in _paths(inputs)), output=os.fspath(output))
    return RunConfig.model_validate(data)


def _text_layer_alias(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with OCRmyPDF's ``skip_text``/``force_ocr``/``redo_ocr`` turned into
    ``text_layer``; two that disagree are a ``ConfigError``."""
    given = [name for name in TEXT_LAYER_ALIASES if options.get(name)]
    rest = {k: v for k, v in options.items() if k not in TEXT_LAYER_ALIASES}
    if not given:
        return rest
    mode = TEXT_LAYER_ALIASES[given[0]]
    chosen = rest.get("text_layer")
    if len(given) > 1 or chosen not in (None, "auto", mode):
        flags = [f"--{name.replace('_', '-')}" for name in given]
        if chosen not in (None, "auto", mode):
            flags.append(f"--text-layer {chosen}")
        raise ConfigError(f"{' and '.join(flags)} ask for different pages to be OCR'd: give one")
    return rest | {"text_layer": mode}


def option_for(section: str, field: str) -> str:
    """The option that sets ``field`` of ``section`` (``"render"``, ``"worker_memory_mb"``:
    ``render_memory``); ``KeyError`` when no option does."""
    for name, (where, what, _) in _OPTIONS.items():
        if (where, what) == (section, field):
            return name
    raise KeyError(f"{section}.{field}")


def option_default(name: str) -> Any:
    """The configuration's default for option ``name``, written as its flag takes it (a
    list as ``"a,b"``, a command as shell words), so that a flag shows the default it gets
    without restating it."""
    section, field, _ = _OPTIONS[name]
    model = RunConfig.model_fields[section].annotation if section else RunConfig
    value = model.model_fields[field].get_default(call_default_factory=True)  # type: ignore[union-attr]
    if isinstance(value, tuple):
        return shlex.join(value) if name == "vllm_command" else ",".join(map(str, value))
    return value


def check_option_names(options: Mapping[str, Any], known: Iterable[str]) -> None:
    """``UnknownOption`` for the first name of ``options`` not in ``known``, with the
    closest known name as a hint."""
    names = set(known)
    for name in options:
        if name not in names:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UnknownOption(f"unknown option {name!r}{hint}")


def _paths(inputs: Any) -> tuple[Any, ...]:
    return (inputs,) if isinstance(inputs, str | os.PathLike) else tuple(inputs)


def _passwords(
    password: str | Iterable[str] | None, path: str | os.PathLike[str] | None
) -> tuple[SecretStr, ...]:
    secrets = [*_many(password or ()), *_password_file(path)]
    return tuple(SecretStr(s) for s in secrets)


def _password_file(path: str | os.PathLike[str] | None) -> list[str]:
    if path is None:
        return []
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [line.rstrip("\r\n") for line in lines if line.strip()]
