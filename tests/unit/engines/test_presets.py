"""Managed-server presets: which flags ``--preset`` adds, and which it leaves out."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ocrflow.config import EngineOptions, RunConfig
from ocrflow.engines.presets import FP8_KV_FLAGS, FP8_WEIGHT_FLAGS, preset_flags
from ocrflow.errors import ConfigError
from ocrflow.readers.session import managed_flags
from ocrflow.recipes.deepseek import DeepseekRecipe
from ocrflow.recipes.olmocr import OlmocrRecipe

KV = FP8_KV_FLAGS
BOTH = (*FP8_KV_FLAGS, *FP8_WEIGHT_FLAGS)


def test_fp8_on_gpus_quantizes_the_kv_cache_and_the_weights() -> None:
    flags = managed_flags(
        DeepseekRecipe(),
        EngineOptions(kind="vllm", model="deepseek-ai/DeepSeek-OCR", gpus=("0",), preset="fp8"),
    )
    assert flags == (*DeepseekRecipe().server_flags, *BOTH)


@pytest.mark.parametrize(
    ("model", "gpus", "flags"),
    [
        ("deepseek-ai/DeepSeek-OCR", (), ()),  # the CPU build: no FP8 weight kernels
        ("deepseek-ai/DeepSeek-OCR", ("0",), ("--dtype", "float32")),  # vLLM refuses it
        ("allenai/olmOCR-2-7B-1025-FP8", ("0",), ()),  # the checkpoint is quantized
        ("Qwen/Qwen2.5-VL-7B-Instruct-AWQ", ("0",), ()),
        ("deepseek-ai/DeepSeek-OCR", ("0",), ("--quantization=bitsandbytes",)),  # user's
    ],
)
def test_fp8_leaves_the_weight_flags_out_where_they_would_be_refused(
    model: str, gpus: tuple[str, ...], flags: tuple[str, ...]
) -> None:
    assert preset_flags("fp8", model=model, gpus=gpus, flags=flags) == KV


def test_the_olmocr_gpu_default_is_the_fp8_kv_preset_and_a_named_preset_replaces_it() -> None:
    recipe = OlmocrRecipe()
    model = "allenai/olmOCR-2-7B-1025-FP8"
    on_gpus = managed_flags(recipe, EngineOptions(kind="vllm", model=model, gpus=("0",)))
    assert on_gpus == (*recipe.server_flags, *KV)
    on_cpu = managed_flags(recipe, EngineOptions(kind="vllm", model=model))
    assert on_cpu == recipe.server_flags
    none = managed_flags(
        recipe, EngineOptions(kind="vllm", model=model, gpus=("0",), preset="none")
    )
    assert none == recipe.server_flags
    # A user flag still comes last, so it wins over the preset's.
    user = EngineOptions(
        kind="vllm", model="m", preset="fp8", server_flags=("--kv-cache-dtype", "auto")
    )
    assert managed_flags(recipe, user)[-4:] == (*KV, "--kv-cache-dtype", "auto")


def test_an_unknown_preset_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown preset 'fp4'; known: fp8, fp8-kv, none"):
        managed_flags(OlmocrRecipe(), EngineOptions(kind="vllm", model="m", preset="fp4"))


def test_a_preset_needs_a_server_ocrflow_starts() -> None:
    with pytest.raises(ValidationError, match="use --engine vllm"):
        EngineOptions(kind="openai", model="m", preset="fp8")


def test_the_preset_is_in_the_fingerprint_only_when_named() -> None:
    plain = RunConfig(inputs=("a",), output="o", engine=EngineOptions(kind="vllm", model="m"))
    fp8 = plain.model_copy(update={"engine": EngineOptions(kind="vllm", model="m", preset="fp8")})
    assert "preset" not in plain.fingerprint_fields()
    assert fp8.fingerprint_fields()["preset"] == "fp8"
    assert plain.fingerprint() != fp8.fingerprint()
