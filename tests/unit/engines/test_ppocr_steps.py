"""ocrflow's own PP-OCR pre- and post-processing (``ppocr_det.py``, ``ppocr_lines.py``)
against rapidocr's, on real pages: the same boxes, the same line inputs, the same texts and
confidences. rapidocr stays installed (its wheel carries the models), so its pipeline is
the reference; ocrflow no longer imports it at run time (its configuration loader cost
0.95 s a run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from ocrflow.engines.ppocr import PpocrModels, bundled_model_files
from ocrflow.engines.ppocr_det import detector_input
from ocrflow.engines.ppocr_lines import (
    CtcDecoder,
    best_classes,
    classifier_input,
    recognizer_input,
)
from ocrflow.render.raster import fit_longest_side

#: Pages and a word each must give when read upright (None: read upside down here).
PAGES = {
    "images/tesseract__phototest.tif": "quick",
    "images/tesseract__eurotext.tif": "quick",
    "images/tesseract__phototest-rotated-180.png": None,
}


@pytest.fixture(scope="module")
def reference() -> Any:
    """rapidocr's own detector, classifier and recogniser on the same files, configured as
    ocrflow configured it before (1600 px detector side, 48 px minimum line width)."""
    from rapidocr import RapidOCR

    files = bundled_model_files()
    ocr = RapidOCR(
        params={
            "Global.log_level": "error",
            "EngineConfig.onnxruntime.intra_op_num_threads": 1,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            "Det.model_path": str(files["det"]),
            "Det.limit_type": "max",
            "Det.limit_side_len": 1600,
            "Cls.model_path": str(files["cls"]),
            "Cls.cls_batch_num": 12,
            "Rec.model_path": str(files["rec"]),
            "Rec.rec_batch_num": 1,
            "Rec.rec_img_shape": [3, 48, 48],
        }
    )
    return ocr._load_det_model(), ocr._load_cls_model(), ocr._load_rec_model()


@pytest.fixture(scope="module")
def ours() -> PpocrModels:
    return PpocrModels.load(
        threads=1, det_side=1600, rec_batch=1, cls_batch=12, backend="onnxruntime"
    )


def _page(corpus: Path, name: str) -> np.ndarray:
    with Image.open(corpus / name) as image:
        rgb = np.asarray(fit_longest_side(image.convert("RGB"), 1288))
    return np.ascontiguousarray(rgb[:, :, ::-1])


@pytest.mark.parametrize("name", PAGES)
def test_boxes_and_texts_equal_rapidocrs(
    corpus: Path, name: str, reference: Any, ours: PpocrModels
) -> None:
    detector, classifier, recognizer = reference
    from rapidocr.ch_ppocr_rec import TextRecInput

    bgr = _page(corpus, name)
    # The detector's input, bit for bit, and the boxes drawn from its output.
    assert np.array_equal(detector_input(bgr, 1600), detector.get_preprocess()(bgr))
    expected = np.asarray(detector(bgr).boxes, np.float32)
    quads = ours.detect(bgr)
    assert len(quads) >= 8
    assert np.array_equal(quads, expected)
    crops = [ours.crop(bgr, quad) for quad in quads]
    # The classifier's labels on the longest lines (upside down on the rotated page).
    longest = sorted(crops, key=lambda c: c.shape[1] / c.shape[0], reverse=True)[:12]
    labels = [label for label, _ in classifier(longest).cls_res]
    share = ours.upside_down_share(longest)
    lengths = np.array([c.shape[1] / c.shape[0] for c in longest])
    flipped = np.array([label == "180" for label in labels])
    assert share == pytest.approx(lengths[flipped].sum() / lengths.sum())
    assert (share > 0.5) == (PAGES[name] is None)
    # Texts and confidences of every line, with and without a margin of background.
    reference_read = recognizer(TextRecInput(img=crops))
    texts, scores = ours.read_page(ours.page_lines(crops, 0.0))
    assert texts == tuple(reference_read.txts)
    assert scores == tuple(float(s) for s in reference_read.scores)
    if PAGES[name] is not None:
        assert any(PAGES[name] in text for text in texts)


def test_line_inputs_equal_rapidocrs(reference: Any) -> None:
    _, classifier, recognizer = reference
    rng = np.random.default_rng(7)
    lines = [rng.integers(0, 256, (h, w, 3), np.uint8) for h, w in ((31, 400), (40, 30), (52, 9))]
    for line in lines:
        ratio = max(1.0, line.shape[1] / line.shape[0])
        assert np.array_equal(recognizer_input([line])[0], recognizer.resize_norm_img(line, ratio))
        assert np.array_equal(classifier_input([line])[0], classifier.resize_norm_img(line))
    # A batch is as wide as its widest line; narrower lines are padded with zeros.
    batch = recognizer_input(lines)
    assert batch.shape == (3, 3, 48, int(48 * 400 / 31))
    assert not batch[1, :, :, 60:].any()


def test_ctc_decoding_merges_repeats_drops_blanks_and_averages_kept_steps() -> None:
    decoder = CtcDecoder(["a", "b"])  # classes: blank, a, b, space
    assert decoder.classes == 4
    steps = np.array(
        [
            [0.9, 0.05, 0.05, 0.0],  # blank
            [0.1, 0.8, 0.1, 0.0],  # a
            [0.1, 0.7, 0.2, 0.0],  # a again: merged
            [0.6, 0.2, 0.2, 0.0],  # blank
            [0.1, 0.6, 0.3, 0.0],  # a after a blank: kept
            [0.0, 0.1, 0.2, 0.7],  # space
            [0.0, 0.1, 0.9, 0.0],  # b
        ],
        np.float32,
    )
    [(text, score)] = decoder.decode_batch(best_classes(steps[np.newaxis]))
    assert text == "aa b"
    assert score == pytest.approx(np.mean([0.8, 0.6, 0.7, 0.9]), abs=1e-5)
    assert decoder.decode_batch(best_classes(steps[np.newaxis, :1])) == [("", 0.0)]
