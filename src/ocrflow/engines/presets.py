"""Named sets of ``vllm serve`` flags for a managed server (``--preset``).

``fp8``: an FP8 KV cache (``--kv-cache-dtype fp8``, about twice the tokens in the same
memory) and FP8 weights quantized at load time (``--quantization fp8``). ``fp8-kv``: the KV
cache alone (the olmOCR recipe's default on GPUs). Checked against vLLM 0.32's CPU build
(tests/integration/test_vllm_presets.py): the KV cache flag is accepted and serves; FP8
weights are refused for float32 models ("torch.float32 is not supported for quantization
method fp8") and accepted for bfloat16/float16. The weight flag is left out where a refusal
can be told in advance: no GPUs named, ``--dtype float32`` among the flags, a checkpoint
that names its own quantization, or a ``--quantization`` the user already gave.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType

from ocrflow.engines.server_spec import flag_value
from ocrflow.errors import ConfigError

log = logging.getLogger("ocrflow.engine")

FP8_KV_FLAGS = ("--kv-cache-dtype", "fp8")
FP8_WEIGHT_FLAGS = ("--quantization", "fp8")
#: A model id with one of these in its name ships quantized weights (vLLM reads the method
#: from its config and refuses a different ``--quantization``).
_PREQUANTIZED = re.compile(r"fp8|awq|gptq|int4|int8|nvfp4|w4a16|w8a8|bnb|4bit|8bit", re.I)
_FLOAT32 = frozenset({"float32", "float"})


@dataclass(frozen=True, slots=True)
class Preset:
    """Flags for every managed server, and weight-quantization flags where they can run."""

    name: str
    flags: tuple[str, ...] = ()
    weight_flags: tuple[str, ...] = ()


PRESETS = MappingProxyType(
    {
        "fp8": Preset("fp8", FP8_KV_FLAGS, FP8_WEIGHT_FLAGS),
        "fp8-kv": Preset("fp8-kv", FP8_KV_FLAGS),
        "none": Preset("none"),
    }
)


def get_preset(name: str) -> Preset:
    """The preset called ``name``; ``ConfigError`` naming the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None


def weight_flags_refused(model: str, gpus: Sequence[str], flags: Sequence[str]) -> str | None:
    """Why FP8 weight flags would be refused by the server, or None when they may go."""
    if not gpus:
        return "no GPUs named (vLLM's CPU build has no FP8 weight kernels)"
    if (flag_value(flags, ("--dtype",)) or "").lower() in _FLOAT32:
        return "vLLM refuses fp8 quantization of float32 weights"
    if _PREQUANTIZED.search(model):
        return f"{model} ships quantized weights"
    if flag_value(flags, ("--quantization", "-q")) is not None:
        return "--quantization is already set"
    return None


def preset_flags(
    name: str | None, *, model: str, gpus: Sequence[str], flags: Sequence[str] = ()
) -> tuple[str, ...]:
    """The flags preset ``name`` adds to a server that gets ``flags`` (recipe and user
    flags): its own, less the weight flags where the server would refuse them (logged)."""
    if not name:
        return ()
    preset = get_preset(name)
    if not preset.weight_flags:
        return preset.flags
    refused = weight_flags_refused(model, gpus, flags)
    if refused:
        log.info("preset %s: %s left out: %s", name, " ".join(preset.weight_flags), refused)
        return preset.flags
    return (*preset.flags, *preset.weight_flags)
