"""The alphabetic recogniser (``ppocr_charset.py``): the whole model's last layer cut down to
alphabetic scripts, used first on OpenVINO, with the whole model where a page or a line
holds another script. Real models, real pages: Latin pages read as before, CJK and Hangul
text is not lost."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ocrflow.engines import runtime
from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.ppocr import bundled_model_files
from ocrflow.engines.ppocr_charset import alphabetic_classes, alphabetic_model, is_alphabetic
from ocrflow.render.raster import fit_longest_side

needs_openvino = pytest.mark.skipif(
    not runtime.openvino_installed(), reason="the alphabetic recogniser is OpenVINO's"
)


def test_alphabetic_scripts_are_kept_and_cjk_is_not() -> None:
    assert all(map(is_alphabetic, "aZé9,.’€Ωж→"))
    assert not any(map(is_alphabetic, "愚园한ユअ"))
    # blank, a b, space: the kept indices of the model's classes.
    assert alphabetic_classes(["a", "愚", "b"]) == [0, 1, 3, 4]


@needs_openvino
def test_the_cut_down_model_scores_only_the_alphabetic_classes() -> None:
    import openvino as ov

    model = ov.Core().read_model(str(bundled_model_files()["rec"]))
    characters = runtime.openvino_metadata(model, "character")
    assert characters is not None
    classes = alphabetic_classes(characters.splitlines())
    assert 1500 < len(classes) < 2500  # of 18,710
    reduced = alphabetic_model(model)
    assert reduced.output(0).get_partial_shape()[2].get_length() == len(classes)
    compiled = ov.Core().compile_model(reduced, "CPU", runtime.openvino_config(1))
    line = np.random.default_rng(3).uniform(-1, 1, (1, 3, 48, 320)).astype(np.float32)
    probabilities = compiled([line])[0]
    assert probabilities.shape[2] == len(classes)
    assert np.allclose(probabilities.sum(axis=2), 1.0, atol=1e-2)  # still a softmax


def _read(corpus: Path, name: str, charset: str) -> str:
    with Image.open(corpus / "images" / name) as image:
        page = fit_longest_side(image.convert("RGB"), 1288)
    return EmbeddedEngine(threads=1, backend="openvino", charset=charset).recognize(page).text


@needs_openvino
def test_a_latin_page_reads_the_same_with_the_alphabetic_recogniser(corpus: Path) -> None:
    engine = EmbeddedEngine(threads=1, backend="openvino")
    assert engine.options.charset == "auto"
    engine.recognize(Image.new("RGB", (64, 64), "white"))
    models = engine._models
    assert models is not None and models.alphabetic is not None
    assert _read(corpus, "tesseract__phototest.tif", "auto") == _read(
        corpus, "tesseract__phototest.tif", "all"
    )


@needs_openvino
@pytest.mark.parametrize(
    ("name", "words"),
    [
        # Its longest lines hold CJK: the whole recogniser reads the page.
        ("easyocr__chinese.jpg", ("愚园路", "Yuyuan Rd.")),
        # An English page with a short line of Japanese: read again, as it was unsure.
        ("unstructured__english-and-korean.png", ("ユ", "RULES AND INSTRUCTIONS")),
    ],
)
def test_other_scripts_are_read_by_the_whole_recogniser(
    corpus: Path, name: str, words: tuple[str, ...]
) -> None:
    text = _read(corpus, name, "auto")
    assert all(word in text for word in words)
    assert text == _read(corpus, name, "all")


@needs_openvino
def test_a_recogniser_of_another_shape_is_read_whole(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openvino as ov

    from ocrflow.engines import ppocr
    from ocrflow.engines.ppocr_charset import reduced_model

    # The detector ends in a sigmoid, not a softmax over characters: no cut is made.
    detector = ov.Core().read_model(str(bundled_model_files()["det"]))
    with pytest.raises(ValueError, match="not Softmax"):
        reduced_model(detector, [0, 1])
    # A recogniser the cut does not fit leaves the engine on the whole one.
    monkeypatch.setattr(ppocr, "alphabetic_model", lambda model: reduced_model(detector, [0]))
    engine = EmbeddedEngine(threads=1, backend="openvino")
    with Image.open(corpus / "images" / "tesseract__phototest.tif") as image:
        text = engine.recognize(image).text
    assert engine._models is not None and engine._models.alphabetic is None
    assert "quick brown dog" in text
