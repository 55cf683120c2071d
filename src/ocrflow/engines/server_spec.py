"""What a managed vLLM server runs: ``ServerSpec`` and the ``vllm serve`` command line.

Pure functions, no processes: the flags come from the caller (recipe flags, then user
flags, given verbatim; vLLM's parser keeps the last value of a repeated option). Those are
the operator's; what ocrflow adds from configuration cannot become an option: the model is
checked (``model_names``: never a leading ``-``) and every value travels as ``--flag=value``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from ocrflow.engines.model_names import check_model_name, check_served_name
from ocrflow.errors import ConfigError

#: Flags this module sets itself, and the ``ServerSpec`` field to use instead.
OWNED_FLAGS = MappingProxyType(
    {
        "--host": "host",
        "--port": "base_port",
        "--served-model-name": "served_model_name",
        "--api-key": "api_key",
    }
)
DATA_PARALLEL_FLAGS = ("--data-parallel-size", "-dp")


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """What to run: ``COMMAND MODEL --host=H --port=P --served-model-name=N FLAGS...``.

    ``gpus``: one replica per entry, each with ``CUDA_VISIBLE_DEVICES=<entry>`` (an entry
    may name several devices, "0,1", for tensor parallelism); empty means one replica with
    the environment untouched. With ``--data-parallel-size`` in ``flags`` there is one
    replica that sees every GPU listed. ``api_key`` reaches vLLM as ``VLLM_API_KEY`` in its
    environment, never on the command line (which ``ps`` shows and the log records).
    ``log_dir``: where ``vllm-<replica>.log`` go (appended to across restarts); None makes
    a new temporary directory. ``max_restarts`` counts per replica over the whole run.
    """

    model: str
    served_model_name: str | None = None
    flags: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    base_port: int = 0
    command: tuple[str, ...] = ("vllm", "serve")
    env: Mapping[str, str] = field(default_factory=dict)
    log_dir: str | None = None
    ready_timeout_s: float = 900.0
    max_restarts: int = 3
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for flag in self.flags:
            owned = OWNED_FLAGS.get(flag_name(flag))
            if owned:
                raise ConfigError(f"vllm flag {flag!r} is set by ocrflow; set {owned} instead")
        if not self.model or not self.command:
            raise ConfigError("a managed vLLM server needs a model and a command")
        check_model_name(self.model)
        check_served_name(self.name)
        if self.max_restarts < 0 or self.ready_timeout_s <= 0 or not 0 <= self.base_port < 65536:
            raise ConfigError("max_restarts >= 0, ready_timeout_s > 0, 0 <= base_port < 65536")

    @property
    def name(self) -> str:
        """The model name clients send and ``/v1/models`` lists."""
        return self.served_model_name or self.model


def flag_name(arg: str) -> str:
    """The option an argument names, spelled as vLLM reads it (``--a_b=1`` is ``--a-b``)."""
    key = arg.partition("=")[0]
    return "--" + key[2:].replace("_", "-") if key.startswith("--") else key


def flag_value(flags: Sequence[str], names: Sequence[str]) -> str | None:
    """The last value given to any of ``names`` (``--x v`` or ``--x=v``), else None."""
    value = None
    for i, flag in enumerate(flags):
        _, eq, inline = flag.partition("=")
        if flag_name(flag) in names:
            value = inline if eq else (flags[i + 1] if i + 1 < len(flags) else None)
    return value


def data_parallel_size(flags: Sequence[str]) -> int:
    """``--data-parallel-size`` from the flags; 1 when absent."""
    value = flag_value(flags, DATA_PARALLEL_FLAGS)
    try:
        return int(value) if value is not None else 1
    except ValueError:
        raise ConfigError(f"--data-parallel-size needs a number, got {value!r}") from None


def build_command(spec: ServerSpec, port: int) -> list[str]:
    """The argv of one replica; ``spec.flags`` come last, verbatim.

    vLLM takes the model as its positional argument (its ``--model`` is deprecated), so the
    model is checked again here: a value with a leading ``-`` never reaches the argv. The
    values ocrflow sets are joined to their flags, so none can be read as an option.
    """
    model = check_model_name(spec.model)
    owned = [f"--host={spec.host}", f"--port={port}", f"--served-model-name={spec.name}"]
    return [*spec.command, model, *owned, *spec.flags]


def replica_devices(spec: ServerSpec) -> list[str | None]:
    """``CUDA_VISIBLE_DEVICES`` of each replica; None leaves the environment as it is."""
    if not spec.gpus:
        return [None]
    if data_parallel_size(spec.flags) > 1:
        return [",".join(spec.gpus)]
    return list(spec.gpus)


def printable_command(argv: Sequence[str]) -> str:
    """The argv as a shell line for logs (it holds no secret: the key travels by env)."""
    return shlex.join(argv)
