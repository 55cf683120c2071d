"""Regression guard: the embedded engine's default configuration, pinned.

Not a timing: the steps a page goes through and the options the models run with. A change
of detector size, backend, thread layout or batch size is a speed (or accuracy) change that
must show up in review, with its figures in docs/embedded-engine.md, and an edit here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError

from ocrflow.engines import detsize, embedded, ppocr, ppocr_det, ppocr_lines, runtime
from ocrflow.engines.embedded import EmbeddedEngine, EmbeddedOptions, default_threads
from ocrflow.engines.ppocr import bundled_model_files
from ocrflow.errors import ConfigError

#: The measured defaults (docs/embedded-engine.md, "Speed"). Edit with the figures.
PINNED_OPTIONS = {
    "threads": 1,
    "det_side": 1600,
    "det_text_px": 13.0,
    "line_margin": 0.25,
    "rec_batch": 1,
    "min_score": 0.5,
    "detect_rotation": True,
    "backend": "auto",
    "charset": "auto",
}
PINNED_STEPS = ("detect", "classify", "recognize", "layout", "blocks")
PINNED_MODELS = {
    "det": "PP-OCRv6_det_small.onnx",
    "cls": "ch_ppocr_mobile_v2.0_cls_mobile.onnx",
    "rec": "PP-OCRv6_rec_small.onnx",
}


def test_default_options_are_pinned() -> None:
    assert dataclasses.asdict(EmbeddedOptions()) == PINNED_OPTIONS
    assert (embedded.CLASSIFY_LINES, embedded.SUSPECT_SHARE, embedded.CONFIRM_LINES) == (
        12,
        0.3,
        6,
    )
    # The detector's input: the text at 13 px, never under 1024 px (detsize.py).
    assert (detsize.MIN_SIDE, detsize.PROBE_SIDE, detsize.MIN_COMPONENTS) == (1024, 1024, 20)
    # The whole recogniser reads a page's 2 longest lines first (ppocr.py).
    assert ppocr.PROBE_LINES == 2


def test_models_are_the_wheels_own_files() -> None:
    files = bundled_model_files()
    assert {task: path.name for task, path in files.items()} == PINNED_MODELS
    assert all(path.is_file() for path in files.values())


def test_thread_layout_shares_the_cores_among_parallel_pages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cores = {"n": 2}
    monkeypatch.setattr(embedded, "usable_cpus", lambda: cores["n"])
    # 2 cores: one page alone gets both, two pages at once one each.
    assert (default_threads(1), default_threads(2), default_threads(4)) == (2, 1, 1)
    cores["n"] = 16
    assert (default_threads(1), default_threads(4), default_threads(16)) == (4, 4, 1)
    assert EmbeddedEngine(max_parallel=16).options.threads == 1


def test_auto_backend_is_openvino_exactly_when_installed() -> None:
    expected = "openvino" if runtime.openvino_installed() else "onnxruntime"
    assert runtime.resolve_backend("auto") == expected
    assert runtime.resolve_backend("onnxruntime") == "onnxruntime"
    with pytest.raises(ConfigError, match="not one of"):
        runtime.resolve_backend("tensorrt")


def test_openvino_settings_run_each_call_in_the_calling_thread() -> None:
    # One stream a compiled model (pages read at once get a compiled model each): with
    # several, a synchronous infer waits on the streams executor's threads
    # (test_openvino_runtime.py).
    assert runtime.openvino_config(2) == {
        "INFERENCE_NUM_THREADS": "2",
        "NUM_STREAMS": "1",
        "PERFORMANCE_HINT": "LATENCY",
        "ENABLE_CPU_PINNING": "NO",
        "CPU_RUNTIME_CACHE_CAPACITY": "1000",
    }
    assert (runtime.REC_WIDTH_STEP, runtime.REC_WIDTH_GROWTH, len(runtime.REC_WIDTHS)) == (
        32,
        1.125,
        37,
    )


def _loaded(**options: object) -> EmbeddedEngine:
    engine = EmbeddedEngine(**options)  # type: ignore[arg-type]
    engine.recognize(Image.new("RGB", (64, 64), "white"))  # loads the models
    return engine


def test_loaded_models_run_with_the_pinned_pre_and_post_processing() -> None:
    models = _loaded(max_parallel=2)._models
    assert models is not None
    assert (models.det_side, models.cls_batch, models.rec_batch) == (
        1600,
        embedded.CLASSIFY_LINES,
        1,
    )
    # PaddleOCR's post-processing with rapidocr's settings (rapidocr/config.yaml).
    assert (
        ppocr_det.DB_THRESHOLD,
        ppocr_det.BOX_THRESHOLD,
        ppocr_det.UNCLIP_RATIO,
        ppocr_det.MAX_CANDIDATES,
    ) == (0.3, 0.5, 1.6, 1000)
    # Lines are 48 px high and not padded to PaddleOCR's 320 px minimum width.
    line = np.zeros((20, 30, 3), np.uint8)
    assert ppocr_lines.recognizer_input([line]).shape == (1, 3, 48, 72)
    assert ppocr_lines.classifier_input([line]).shape == (1, 3, 48, 192)
    # The recogniser's characters come from its own file: blank, 18,708 and a space.
    assert models.recognizer.decoder.classes == 18710


@pytest.mark.skipif(not runtime.openvino_installed(), reason="the openvino extra is absent")
def test_the_openvino_backend_gives_each_parallel_page_a_compiled_model() -> None:
    models = _loaded(max_parallel=2, threads=1, backend="openvino")._models
    assert models is not None
    sessions = (models.detector, models.classifier, models.recognizer.session)
    if models.alphabetic is not None:
        sessions += (models.alphabetic.session,)
    widths = (None, None, runtime.rec_width_bucket, runtime.rec_width_bucket)
    # OpenVINO compiles edited graphs: the detector's head at a quarter of the resolution
    # (ppocr_dethead.py), the recogniser cut down to alphabetic scripts (ppocr_charset.py).
    names = ("det-quarter-head", None, None, "rec-alphabetic")
    for session, bucket, name in zip(sessions, widths, names, strict=False):
        assert isinstance(session, runtime.OpenVinoSession)
        if name is not None:
            assert session._model.get_friendly_name() == name
        assert (session._slots, session._widths) == (2, bucket)
        copy = session._borrow((1,))
        compiled = copy.request.get_compiled_model()
        assert int(compiled.get_property("NUM_STREAMS")) == 1
        assert int(compiled.get_property("INFERENCE_NUM_THREADS")) == 1
        session._give_back(copy)


def test_onnxruntime_sessions_sleep_between_operators() -> None:
    models = _loaded(backend="onnxruntime", threads=2)._models
    assert models is not None
    # ONNX Runtime has no alphabetic recogniser: the graph edit is OpenVINO's.
    assert models.alphabetic is None
    for session in (models.detector, models.classifier, models.recognizer.session):
        assert isinstance(session, runtime.OrtSession)
        options = session.session.get_session_options()
        assert options.intra_op_num_threads == 2
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_a_page_goes_through_the_pinned_steps(corpus: Path) -> None:
    page = corpus / "images" / "tesseract__phototest.tif"
    with Image.open(page) as image:
        result = EmbeddedEngine(threads=1).recognize(image)
    assert tuple(result.timings) == PINNED_STEPS
    assert "quick brown dog" in result.text


def test_auto_is_the_default_runtime_and_the_flag_reaches_the_engine() -> None:
    from ocrflow.config.builder import build_run_config
    from ocrflow.engines.factory import build_engine

    assert build_run_config(["in"], "out").engine.backend == "auto"
    chosen = build_run_config(
        ["in"], "out", embedded_backend="openvino", embedded_charset="all"
    ).engine
    engine = build_engine(chosen)
    assert isinstance(engine, EmbeddedEngine)
    assert (engine.options.backend, engine.options.charset) == ("openvino", "all")
    assert build_engine(build_run_config(["in"], "out").engine).options.charset == "auto"
    with pytest.raises(ValidationError, match="'auto' or 'all'"):
        build_run_config(["in"], "out", embedded_charset="latin")
    # The Python API refuses it too, instead of reading every line whole.
    with pytest.raises(ConfigError, match="'auto' or 'all'"):
        EmbeddedEngine(charset="latin")
