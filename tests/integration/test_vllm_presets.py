"""``--preset fp8`` against the real vLLM (CPU build): which of its flags that build takes.

vLLM's own Python builds its engine configuration for each flag list
(``vllm_config_probe.py``: the checks ``vllm serve`` makes before loading weights). What it
shows for vLLM 0.32 on CPU, and what the preset does about it:

- ``--kv-cache-dtype fp8`` is accepted (the KV cache is fp8). ``test_vllm_real.py`` also
  starts a real server with it and gets answers.
- ``--quantization fp8`` is refused for a float32 model and accepted for bfloat16: the
  preset leaves it out where ``--dtype float32`` is among the flags, and on CPU runs.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ocrflow.config import EngineOptions
from ocrflow.engines.presets import FP8_KV_FLAGS, FP8_WEIGHT_FLAGS
from ocrflow.readers.session import managed_flags
from ocrflow.recipes.deepseek import DeepseekRecipe
from tests.needs import TINY_VLM, VLLM_VENV, need_vllm

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(300)]

PROBE = Path(__file__).with_name("vllm_config_probe.py")
CPU_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}


def vllm_verdicts(flag_lists: list[list[str]]) -> list[dict[str, object]]:
    """vLLM's verdict on each flag list, for the tiny model."""
    completed = subprocess.run(
        [str(VLLM_VENV / "bin" / "python"), str(PROBE), str(TINY_VLM), json.dumps(flag_lists)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **CPU_ENV},
        check=True,
    )
    return [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]


def test_the_fp8_preset_gives_the_cpu_build_only_flags_it_accepts() -> None:
    need_vllm()
    recipe = DeepseekRecipe()
    on_cpu = EngineOptions(
        kind="vllm", model=str(TINY_VLM), preset="fp8", server_flags=("--dtype", "float32")
    )
    cpu_flags = list(managed_flags(recipe, on_cpu))
    # What a GPU run of the same float32 model would get (weights left out), and what it
    # would get for a bfloat16 model (weights in).
    gpu_f32 = list(managed_flags(recipe, on_cpu.model_copy(update={"gpus": ("0",)})))
    bf16 = on_cpu.model_copy(update={"gpus": ("0",), "server_flags": ("--dtype", "bfloat16")})
    gpu_bf16 = list(managed_flags(recipe, bf16))
    assert "--quantization" not in cpu_flags + gpu_f32 and "--quantization" in gpu_bf16
    refused = [*FP8_KV_FLAGS, *FP8_WEIGHT_FLAGS, "--dtype", "float32"]

    verdicts = vllm_verdicts([cpu_flags, gpu_f32, gpu_bf16, refused])

    cpu, f32, bf, weights_f32 = verdicts
    assert cpu["ok"] and cpu["kv_cache_dtype"] == "fp8", cpu
    assert f32["ok"] and f32["quantization"] is None, f32
    assert bf["ok"] and (bf["kv_cache_dtype"], bf["quantization"]) == ("fp8", "fp8"), bf
    # The flag the preset leaves out for float32 is one vLLM would refuse.
    assert not weights_f32["ok"]
    assert "float32 is not supported for quantization method fp8" in str(weights_f32["error"])
