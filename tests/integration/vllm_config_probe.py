"""Run by the vLLM build's own Python: does vLLM accept these ``vllm serve`` flags?

``python vllm_config_probe.py MODEL '[["--kv-cache-dtype", "fp8"], [...]]'`` builds vLLM's
engine configuration (argument parser, then ``EngineArgs.create_engine_config``: the checks
``vllm serve`` makes before it loads any weight) for each flag list and prints one JSON line
each: ``{"flags": [...], "ok": true, "kv_cache_dtype": ..., "quantization": ...}`` or
``{"flags": [...], "ok": false, "error": "..."}``. It imports vLLM, so it cannot run in
ocrflow's own environment.
"""

from __future__ import annotations

import json
import sys


def probe(model: str, flags: list[str]) -> dict[str, object]:
    """vLLM's verdict on ``flags`` for ``model``."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    EngineArgs.add_cli_args(parser)
    try:
        args = parser.parse_args(["--model", model, *flags])
        config = EngineArgs.from_cli_args(args).create_engine_config()
    except (Exception, SystemExit) as exc:  # a refusal is the answer, whatever its type
        return {"flags": flags, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {
        "flags": flags,
        "ok": True,
        "kv_cache_dtype": str(config.cache_config.cache_dtype),
        "quantization": config.model_config.quantization,
    }


if __name__ == "__main__":
    for flag_list in json.loads(sys.argv[2]):
        print(json.dumps(probe(sys.argv[1], flag_list)), flush=True)
