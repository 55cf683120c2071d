"""The inference runtime under the embedded engine's PP-OCR models: OpenVINO (installed with
ocrflow where its wheels exist) or ONNX Runtime (always installed), picked by ``backend``.

``open_session`` gives a model as a callable ``Session`` (one array in, the first output
out, and the strings the file carries); the pre- and post-processing around it are
``ppocr_det.py`` and ``ppocr_lines.py``. Both runtimes read the same ONNX files from the
rapidocr wheel, so nothing is downloaded either way. See docs/embedded-engine.md for the
measurements behind ``auto``.
"""

from __future__ import annotations

import bisect
import ctypes
import importlib.util
import math
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

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


def prime_openvino() -> None:
    """Make OpenVINO's first numpy conversion here, in one thread, before models are read
    and edited side by side.

    Its bindings set up their numpy bridge on first use, under a once-flag that waits for
    the GIL; a second thread holding the GIL then waits for the flag's static: both wait
    for ever. ``ocrflow run`` hung so about once in 50 runs, two loaders each converting a
    model's constants (pybind11's ``gil_safe_call_once_and_store``, openvino 2026.4).
    """
    import openvino.opset13 as ops

    ops.constant(np.zeros(1, np.float32)).get_data()


def open_session(
    path: Path,
    *,
    backend: str,
    threads: int,
    streams: int = 1,
    task: str = "",
    edit: Callable[[Any], Any] | None = None,
) -> Session:
    """The model at ``path`` (``task`` "det", "cls" or "rec") run by ``backend`` with
    ``threads`` threads a call and up to ``streams`` calls at once; OpenVINO only: ``edit``
    turns the model read from the file into the one compiled."""
    if backend == "openvino":
        widths = rec_width_bucket if task == "rec" else None
        return OpenVinoSession(path, threads, streams, widths=widths, edit=edit)
    if edit is not None:
        raise ValueError("only OpenVINO models can be edited")
    return OrtSession(path, threads)


def openvino_metadata(model: Any, key: str) -> str | None:
    """A string an ONNX file carried under ``key``, from the OpenVINO model read from it
    (OpenVINO keeps the file's metadata as run-time information under "framework")."""
    info = model.get_rt_info()
    found = info["framework"].get(key) if "framework" in info else None
    return None if found is None else str(found.astype(str))


#: What a session does with its output before returning it: it sees the runtime's own
#: buffer, so a reduction (the recogniser's best class a step) saves copying megabytes.
Reduce = Callable[[np.ndarray], Any]


def _copy(output: np.ndarray) -> np.ndarray:
    return np.array(output, copy=True)


class Session(Protocol):
    """One model, callable on one input array."""

    def __call__(self, inputs: np.ndarray, reduce: Reduce = _copy) -> Any:
        """``reduce`` of the model's first output (by default a copy of it)."""
        ...

    def outputs(self, inputs: np.ndarray, reduces: Sequence[Reduce]) -> list[Any]:
        """``reduces[k]`` of the model's output ``k``, for each of ``reduces``."""
        ...

    def metadata(self, key: str) -> str | None:
        """A string the model file carries under ``key`` (the recogniser's characters)."""
        ...


class OrtSession:
    """One ONNX model run by ONNX Runtime (``ort_session``); thread-safe."""

    def __init__(self, path: Path, threads: int) -> None:
        self.session = ort_session(path, threads)
        self._input = self.session.get_inputs()[0].name

    def __call__(self, inputs: np.ndarray, reduce: Reduce = _copy) -> Any:
        """See ``Session.__call__``."""
        return self.outputs(inputs, (reduce,))[0]

    def outputs(self, inputs: np.ndarray, reduces: Sequence[Reduce]) -> list[Any]:
        """See ``Session.outputs`` (ONNX Runtime's outputs are arrays of their own)."""
        found = self.session.run(None, {self._input: inputs})
        return [
            out if reduce is _copy else reduce(out)
            for out, reduce in zip(found, reduces, strict=False)
        ]

    def metadata(self, key: str) -> str | None:
        """See ``Session.metadata``."""
        return self.session.get_modelmeta().custom_metadata_map.get(key)


def ort_session(path: Path, threads: int) -> Any:
    """An ONNX Runtime session whose worker threads sleep between operators.

    rapidocr's sessions spin, which on a busy machine made two threads far slower than
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


#: The recogniser's input width is padded up to the next of a few sizes (zeros, as PaddleOCR
#: pads a batch of lines). OpenVINO compiles kernels for every new input shape (about 30 ms
#: of CPU for a new line width, 100-150 ms for a new page size) and caches them, and every
#: line width was a new one: 30 corpus images at 640 px left the process at 2.4 GB (ONNX
#: Runtime: 0.3 GB). Widths in steps of 32 px: 1.0 GB and 7 % less CPU a page; steps of
#: 32 px up to 256 px, then about 12.5 % apart (37 sizes up to 8032 px instead of 251,
#: steps of 32 px beyond): 5 % less CPU on a run's first pages, the same afterwards, the
#: same text.
REC_WIDTH_STEP = 32
REC_WIDTH_GROWTH = 1.125
REC_WIDTHS = tuple(
    width
    for width in sorted(
        {REC_WIDTH_STEP * math.ceil(64 * REC_WIDTH_GROWTH**k / REC_WIDTH_STEP) for k in range(60)}
    )
    if width <= 8192
)
#: Kernels kept per compiled model (OpenVINO's default: 5000): every page is still a new
#: detector shape, so this bounds what a long run keeps (measured: 1000 costs no speed).
RUNTIME_CACHE_CAPACITY = 1000


def openvino_config(threads: int) -> dict[str, str]:
    """OpenVINO CPU settings of one compiled model: one stream, so that a synchronous infer
    runs in the calling thread (with several streams it waits on the streams executor's
    threads: after a fork it waits for good), ``threads`` threads, no pinning (the cores are
    shared with the renderers), a bounded kernel cache, and the CPU's default precision
    (bf16 where it has AMX or AVX512-BF16; CER measured equal to f32's on the benchmark
    pages)."""
    return {
        "INFERENCE_NUM_THREADS": str(threads),
        "NUM_STREAMS": "1",
        "PERFORMANCE_HINT": "LATENCY",
        "ENABLE_CPU_PINNING": "NO",
        "CPU_RUNTIME_CACHE_CAPACITY": str(RUNTIME_CACHE_CAPACITY),
    }


class OpenVinoSession:
    """One ONNX model run by OpenVINO on the CPU, a ``Session``.

    Each page read at once gets its own one-stream compiled model with its own infer request
    (built on first need, at most ``slots``), lent to one thread at a time: ``infer`` runs
    in the calling thread and no compiled model is ever used by two threads at once. The
    former layout, one model with a stream a page, handed each ``infer`` to the streams
    executor's threads and waited on them: that wait is where OpenVINO hung
    (docs/embedded-engine.md). After a fork the pool is rebuilt: the child has none of the
    parent's threads, so a model lent out at the fork would never come back.
    """

    def __init__(
        self,
        path: Path,
        threads: int,
        slots: int = 1,
        *,
        widths: Callable[[int], int] | None = None,
        edit: Callable[[Any], Any] | None = None,
    ) -> None:
        import openvino as ov

        self._path = path
        self._core = ov.Core()
        # Read once: every page read at once compiles its own model from it.
        model = self._core.read_model(str(path))
        self._model = model if edit is None else edit(model)
        self._config = openvino_config(threads)
        self._slots = max(1, slots)
        self._widths = widths
        self._reset()
        self._built = 1
        self._give_back(self._build())  # compile now: a broken model fails at load

    def _reset(self) -> None:
        if hasattr(self, "_idle"):
            # A forked child: the parent's models must never be freed here, their
            # destructor joins threads the child does not have (std::system_error, abort).
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(self._idle))
        self._pid = os.getpid()
        self._returned = threading.Condition()
        self._idle: list[_CompiledCopy] = []
        self._built = 0

    def metadata(self, key: str) -> str | None:
        """See ``Session.metadata`` (OpenVINO keeps an ONNX file's metadata as run-time
        information under "framework")."""
        return openvino_metadata(self._model, key)

    def _build(self) -> _CompiledCopy:
        compiled = self._core.compile_model(self._model, "CPU", self._config)
        return _CompiledCopy(compiled.create_infer_request())

    def _give_back(self, copy: _CompiledCopy) -> None:
        with self._returned:
            self._idle.append(copy)
            self._returned.notify()

    def _borrow(self, shape: tuple[int, ...]) -> _CompiledCopy:
        """An idle compiled copy, one that has already run ``shape`` if there is one:
        OpenVINO prepares kernels and memory for each new input shape in each copy (a new
        page size costs the detector about 70 ms, a new line width the recogniser 20-30)."""
        if os.getpid() != self._pid:
            # Before taking the lock: a parent thread may have held it at the fork.
            self._reset()
        with self._returned:
            while not self._idle and self._built >= self._slots:
                self._returned.wait()
            if self._idle:
                ready = [copy for copy in self._idle if shape in copy.shapes]
                chosen = ready[0] if ready else self._idle[0]
                self._idle.remove(chosen)
                return chosen
            self._built += 1
        try:
            return self._build()  # outside the lock: copies come back meanwhile
        except BaseException:
            with self._returned:
                self._built -= 1
                self._returned.notify()
            raise

    @property
    def compiled_models(self) -> int:
        """Compiled models built so far (at most ``slots``)."""
        return self._built

    def __call__(self, inputs: np.ndarray, reduce: Reduce = _copy) -> Any:
        """See ``Session.__call__``."""
        return self.outputs(inputs, (reduce,))[0]

    def outputs(self, inputs: np.ndarray, reduces: Sequence[Reduce]) -> list[Any]:
        """See ``Session.outputs``: each reduction runs before the request is given back,
        since the output tensors' memory is reused by the next call."""
        if self._widths is not None:
            inputs = pad_width(inputs, self._widths(inputs.shape[-1]))
        copy = self._borrow(inputs.shape)
        try:
            copy.request.infer([inputs])
            copy.ran(inputs.shape)
            tensor = copy.request.get_output_tensor
            return [reduce(tensor(k).data) for k, reduce in enumerate(reduces)]
        finally:
            self._give_back(copy)


class _CompiledCopy:
    """A compiled copy of a model with its infer request, and the input shapes it has run
    (no more than OpenVINO's kernel cache keeps, ``RUNTIME_CACHE_CAPACITY``)."""

    __slots__ = ("request", "shapes")

    def __init__(self, request: Any) -> None:
        self.request = request
        self.shapes: set[tuple[int, ...]] = set()

    def ran(self, shape: tuple[int, ...]) -> None:
        """Note that ``shape`` ran: its kernels are prepared in this copy."""
        if len(self.shapes) >= RUNTIME_CACHE_CAPACITY:
            self.shapes.clear()  # the cache evicts its oldest kernels from here on
        self.shapes.add(shape)


def rec_width_bucket(width: int) -> int:
    """The recogniser input width that a line ``width`` px wide is padded to."""
    index = bisect.bisect_left(REC_WIDTHS, width)
    if index < len(REC_WIDTHS):
        return REC_WIDTHS[index]
    return REC_WIDTH_STEP * math.ceil(width / REC_WIDTH_STEP)


def pad_width(batch: np.ndarray, width: int) -> np.ndarray:
    """``batch`` (N, C, H, W) with zeros (normalised mid-grey, as PaddleOCR pads a batch of
    lines) added on the right up to ``width`` columns."""
    extra = width - batch.shape[-1]
    if extra <= 0:
        return batch
    return np.pad(batch, ((0, 0), (0, 0), (0, 0), (0, extra)))
