"""The inference runtime under the embedded engine's PP-OCR models: ONNX Runtime (always
installed) or OpenVINO (``pip install 'ocrflow[openvino]'``), picked by ``backend``.

rapidocr builds each model's wrapper (pre- and post-processing, the recogniser's character
list read from the ONNX file) on ONNX Runtime; ``attach`` then puts the chosen runtime's
session under it. Both read the same ONNX files from the rapidocr wheel, so nothing is
downloaded either way. See docs/embedded-engine.md for the measurements behind ``auto``.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ocrflow.errors import ConfigError

Backend = Literal["auto", "onnxruntime", "openvino"]
BACKENDS: tuple[str, ...] = ("auto", "onnxruntime", "openvino")


def resolve_backend(backend: str) -> str:
    """The runtime ``backend`` names: ``auto`` is OpenVINO when its wheel is installed
    (it was the faster on every page measured), else ONNX Runtime."""
    if backend not in BACKENDS:
        raise ConfigError(f"embedded backend {backend!r} is not one of {', '.join(BACKENDS)}")
    if backend != "auto":
        return backend
    return "openvino" if openvino_installed() else "onnxruntime"


def openvino_installed() -> bool:
    """Whether the ``openvino`` package can be imported (without importing it)."""
    return importlib.util.find_spec("openvino") is not None


def attach(wrapper: Any, path: Path, *, backend: str, threads: int, streams: int = 1) -> None:
    """Run ``wrapper`` (a rapidocr detector, classifier or recogniser built on ONNX
    Runtime) on ``backend`` with ``threads`` threads a call, ``streams`` calls at once."""
    if backend == "openvino":
        wrapper.session = OpenVinoSession(path, threads, streams)
    elif threads > 1:
        # rapidocr's own one-thread session is kept as it is; with more threads ours,
        # which sleeps between operators instead of spinning.
        wrapper.session.session = ort_session(path, threads)


def ort_session(path: Path, threads: int) -> Any:
    """An ONNX Runtime session whose worker threads sleep between operators.

    rapidocr's own sessions spin, which on a busy machine made two threads far slower than
    one (a dense page: 5.2 s against 2.7 s); without spinning, two threads cost about the
    same as one on a busy machine (3.0 s) and save about 40 % of the wall time on an idle one.
    """
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    opts.enable_cpu_mem_arena = False
    # Page sizes vary; cached memory patterns per input shape only pile up.
    opts.enable_mem_pattern = False
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def openvino_config(threads: int, streams: int = 1) -> dict[str, str]:
    """OpenVINO CPU settings: one stream per page read at once, ``threads`` threads each
    (with one stream, requests from parallel pages queue behind each other: measured, a
    2-page batch used one core), no pinning (the cores are shared with the renderers), and
    the CPU's default precision (bf16 where it has AMX or AVX512-BF16; CER measured equal
    to f32's on the benchmark pages)."""
    return {
        "INFERENCE_NUM_THREADS": str(threads * streams),
        "NUM_STREAMS": str(streams),
        "PERFORMANCE_HINT": "LATENCY",
        "ENABLE_CPU_PINNING": "NO",
    }


class OpenVinoSession:
    """One ONNX model compiled by OpenVINO for the CPU, callable as rapidocr's sessions are
    (one input array in, the first output out). An infer request is not thread-safe, so
    each thread gets its own; the compiled model (weights) is shared."""

    def __init__(self, path: Path, threads: int, streams: int = 1) -> None:
        import openvino as ov

        config = openvino_config(threads, streams)
        self._compiled = ov.Core().compile_model(str(path), "CPU", config)
        self._local = threading.local()

    def __call__(self, inputs: np.ndarray) -> np.ndarray:
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self._compiled.create_infer_request()
        request.infer([inputs])
        # The output tensor's memory is reused by the next call: copy it out.
        return np.array(request.get_output_tensor(0).data, copy=True)
