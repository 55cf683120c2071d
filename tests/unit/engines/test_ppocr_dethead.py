"""The detector's upsampling head rewritten at a quarter of the resolution (ppocr_dethead.py):
the same arithmetic, the same lines, and the former model where the rewrite does not fit."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ocrflow.engines import ppocr, runtime
from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.ppocr import bundled_model_files
from ocrflow.engines.ppocr_det import db_quads, detector_input
from ocrflow.engines.ppocr_dethead import quarter_resolution_head
from ocrflow.render.raster import fit_longest_side

pytestmark = pytest.mark.skipif(
    not runtime.openvino_installed(), reason="the openvino extra is absent"
)


def _page(corpus: Path, name: str) -> np.ndarray:
    with Image.open(corpus / "images" / name) as image:
        rgb = np.asarray(fit_longest_side(image.convert("RGB"), 1288))
    return np.ascontiguousarray(rgb[:, :, ::-1])


def _maps(inputs: np.ndarray, precision: str | None) -> tuple[np.ndarray, np.ndarray]:
    import openvino as ov

    core = ov.Core()
    config = runtime.openvino_config(1)
    if precision is not None:
        config["INFERENCE_PRECISION_HINT"] = precision
    path = str(bundled_model_files()["det"])
    maps = []
    for model in (core.read_model(path), quarter_resolution_head(core.read_model(path))):
        maps.append(core.compile_model(model, "CPU", config)([inputs])[0])
    return maps[0], maps[1]


def test_the_rewritten_head_computes_the_same_map_in_f32(corpus: Path) -> None:
    bgr = _page(corpus, "tesseract__phototest.tif")
    inputs = detector_input(bgr, 1600)
    assert inputs is not None
    before, after = _maps(inputs, "f32")
    assert before.shape == after.shape == (1, 1, *inputs.shape[2:])
    # Only the order of the additions differs.
    assert np.abs(before - after).max() < 1e-4
    assert ((before > 0.3) == (after > 0.3)).mean() > 0.99999


def test_the_rewritten_head_finds_the_same_lines(corpus: Path) -> None:
    for name in ("tesseract__phototest.tif", "ocrd__kant_aufklaerung_1784_0017.tif"):
        bgr = _page(corpus, name)
        inputs = detector_input(bgr, 1600)
        assert inputs is not None
        before, after = (db_quads(m, *bgr.shape[:2]) for m in _maps(inputs, None))
        assert len(before) == len(after) > 5
        # bf16 where the CPU has it: corners move by a pixel or two at most.
        assert np.abs(before - after).max() <= 3


def test_a_model_of_another_shape_is_left_as_it_is(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, corpus: Path
) -> None:
    import openvino as ov

    recogniser = ov.Core().read_model(str(bundled_model_files()["rec"]))
    with pytest.raises(ValueError, match="not Sigmoid"):
        quarter_resolution_head(recogniser)

    def refuse(model: object) -> object:
        raise ValueError("the detector ends in Softmax, not Sigmoid")

    monkeypatch.setattr(ppocr, "_EDITS", {**ppocr._EDITS, "det": refuse})
    engine = EmbeddedEngine(threads=1, backend="openvino")
    page = corpus / "images" / "tesseract__phototest.tif"
    logs = caplog.at_level(logging.WARNING, logger="ocrflow.engines.ppocr")
    with logs, Image.open(page) as image:
        text = engine.recognize(image).text
    assert "det model left as it is" in caplog.text
    assert engine._models is not None
    detector = engine._models.detector
    assert isinstance(detector, runtime.OpenVinoSession)
    assert detector._model.get_friendly_name() != "det-quarter-head"
    assert "quick brown dog" in text
