"""The alphabetic recogniser (``ppocr_charset.py``): the whole model's last layer cut down to
alphabetic scripts, used first on OpenVINO, with the whole model where a page or a line
holds another script. Real models, real pages: Latin pages read as before, CJK and Hangul
text is not lost."""

from __future__ import annotations

import difflib
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ocrflow.engines import runtime
from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.ppocr import DOUBT_CHECK_SHARE, PROBE_LINES, PpocrModels, bundled_model_files
from ocrflow.engines.ppocr_charset import (
    RECHECK_SCORE,
    alphabetic_classes,
    alphabetic_model,
    head_model,
    is_alphabetic,
    needs_whole_recogniser,
)
from ocrflow.engines.ppocr_recognizer import LineReading, PageLines
from ocrflow.render.raster import fit_longest_side

needs_openvino = pytest.mark.skipif(
    not runtime.openvino_installed(), reason="the alphabetic recogniser is OpenVINO's"
)


def test_alphabetic_scripts_are_kept_and_cjk_is_not() -> None:
    assert all(map(is_alphabetic, "aZé9,.’€Ωж→"))
    assert not any(map(is_alphabetic, "愚园한ユअ"))
    # blank, a b, space: the kept indices of the model's classes.
    assert alphabetic_classes(["a", "愚", "b"]) == [0, 1, 3, 4]


def test_lines_the_cut_down_recogniser_may_have_cut_are_read_again() -> None:
    # A plain Latin line: 3.3 characters a text height, sure of itself.
    assert not needs_whole_recogniser("The quick brown fox", 0.99, 6.0)
    assert needs_whole_recogniser("The quick brown fox", 0.85, 6.0)  # unsure
    assert needs_whole_recogniser("B.3 ", 0.95, 3.0)  # a gap at the end
    assert needs_whole_recogniser("6.2  biblatex", 0.97, 5.0)  # two spaces in a row
    assert needs_whole_recogniser("TikZ", 0.98, 4.0)  # one character a text height
    assert needs_whole_recogniser("", 0.0, 1.0)


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


@needs_openvino
def test_the_whole_head_reads_what_the_cut_down_model_kept_as_the_whole_model() -> None:
    import openvino as ov

    core, path = ov.Core(), str(bundled_model_files()["rec"])
    config = runtime.openvino_config(1)
    whole = core.compile_model(core.read_model(path), "CPU", config)
    cut = core.compile_model(alphabetic_model(core.read_model(path)), "CPU", config)
    head = core.compile_model(head_model(core.read_model(path)), "CPU", config)
    line = np.random.default_rng(5).uniform(-1, 1, (1, 3, 48, 480)).astype(np.float32)
    cut_probabilities, features = cut([line]).values()
    assert features.shape == (1, 60, 120)  # a step per 8 px, before the last layer
    assert cut_probabilities.shape[:2] == features.shape[:2]
    expected = whole([line])[0]
    again = head([features])[0]
    assert again.shape == expected.shape
    assert np.abs(again - expected).max() < 0.05  # the same layer, fused otherwise
    assert (again.argmax(axis=2) == expected.argmax(axis=2)).mean() > 0.95


def _read(corpus: Path, name: str, charset: str) -> str:
    with Image.open(corpus / "images" / name) as image:
        page = fit_longest_side(image.convert("RGB"), 1288)
    return EmbeddedEngine(threads=1, backend="openvino", charset=charset).recognize(page).text


def _counting(engine: EmbeddedEngine) -> dict[str, list[int]]:
    """Count the lines each recogniser of ``engine`` reads (their input widths; for the
    whole one's head alone, their steps)."""
    models = engine._loaded()
    assert models.alphabetic is not None and models.recognizer.head is not None
    widths: dict[str, list[int]] = {"whole": [], "alphabetic": [], "head": []}

    class Counting:
        def __init__(self, session: runtime.Session, calls: list[int]) -> None:
            self.session, self.calls = session, calls

        def __call__(self, inputs: np.ndarray, reduce: runtime.Reduce) -> object:
            return self.outputs(inputs, (reduce,))[0]

        def outputs(self, inputs: np.ndarray, reduces: list[runtime.Reduce]) -> list[object]:
            steps = inputs.shape[-1] if inputs.ndim == 4 else inputs.shape[1]
            self.calls.extend([steps] * inputs.shape[0])
            return self.session.outputs(inputs, reduces)

        def metadata(self, key: str) -> str | None:
            return self.session.metadata(key)

    for name, model in (("whole", models.recognizer), ("alphabetic", models.alphabetic)):
        object.__setattr__(model, "session", Counting(model.session, widths[name]))
    head = Counting(models.recognizer.head, widths["head"])
    object.__setattr__(models.recognizer, "head", head)
    return widths


@needs_openvino
def test_a_latin_page_reads_the_same_with_the_alphabetic_recogniser(corpus: Path) -> None:
    engine = EmbeddedEngine(threads=1, backend="openvino")
    assert engine.options.charset == "auto"
    widths = _counting(engine)
    with Image.open(corpus / "images" / "tesseract__phototest.tif") as image:
        page = fit_longest_side(image.convert("RGB"), 1288)
    text = engine.recognize(page).text
    # phototest has 8 lines, all sure: the 2 longest go to the whole model, the rest to the
    # cut one, and nothing is read twice.
    assert (len(widths["whole"]), len(widths["alphabetic"])) == (2, 6)
    assert min(widths["whole"]) >= max(widths["alphabetic"])
    assert widths["head"] == []
    assert text == _read(corpus, "tesseract__phototest.tif", "all")


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
    # The whole model's head reads lines again from what the cut one kept, in bf16 where
    # the CPU has it, fused otherwise than in the whole model: a space may come or go.
    assert difflib.SequenceMatcher(None, text, _read(corpus, name, "all")).ratio() > 0.99


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
    cut = {"rec-alphabetic": lambda model: reduced_model(detector, [0])}
    monkeypatch.setattr(ppocr, "_EDITS", {**ppocr._EDITS, **cut})
    engine = EmbeddedEngine(threads=1, backend="openvino")
    with Image.open(corpus / "images" / "tesseract__phototest.tif") as image:
        text = engine.recognize(image).text
    assert engine._models is not None and engine._models.alphabetic is None
    assert "quick brown dog" in text


@needs_openvino
def test_mixed_script_lines_of_an_alphabetic_page_keep_their_cjk(corpus: Path) -> None:
    """Lines of Latin and CJK together (a Chinese manual's contents) among long English
    lines: the cut-down recogniser reads them confidently without their CJK ("A.1.1 安装发行版"
    as "A.1.1 "), so its gaps and its few characters a text height send them to the whole
    recogniser, and they come out as the whole one reads them."""
    import pypdfium2 as pdfium

    from ocrflow.engines.embedded import EmbeddedOptions
    from ocrflow.engines.geometry import line_length
    from ocrflow.engines.line_detection import detect_lines

    engine = EmbeddedEngine(threads=1, backend="openvino")
    models = engine._loaded()
    assert models.alphabetic is not None
    widths = _counting(engine)

    def crops(image: Image.Image) -> list[np.ndarray]:
        bgr = np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])
        options = EmbeddedOptions()
        quads = detect_lines(models, bgr, options.det_side, options.det_text_px)
        return [models.crop(bgr, quad) for quad in quads]

    with Image.open(corpus / "images" / "tesseract__phototest.tif") as image:
        english = crops(image)
    document = pdfium.PdfDocument(str(corpus / "pdfs" / "texlive__lshort-zh-cn.pdf"))
    try:
        page = document[10]
        contents = crops(page.render(scale=1288 / max(page.get_size())).to_pil())
    finally:
        document.close()
    shortest_english = sorted(map(line_length, english))[-6]
    whole = dict(zip(map(id, contents), models.recognizer.read(contents, 1), strict=True))
    mixed = [
        crop
        for crop in contents
        if line_length(crop) < shortest_english
        and not all(map(is_alphabetic, whole[id(crop)][0]))
        and any(c.isascii() and c.isalnum() for c in whole[id(crop)][0])
    ]
    assert len(mixed) >= 5
    # Lines the confidence alone would not send back: read without their CJK, yet sure.
    cut = models.alphabetic.read(mixed, 1)
    pairs = zip(mixed, cut, strict=True)
    assert any(text != whole[id(c)][0] and score >= RECHECK_SCORE for c, (text, score, _) in pairs)
    for counted in widths.values():
        counted.clear()
    texts, _ = models.read_page(models.page_lines(english + mixed, 0.0))
    assert list(texts[len(english) :]) == [whole[id(crop)][0] for crop in mixed]
    # The 2 longest lines (English) go to the whole model, the rest to the cut one; the
    # mixed lines, read again whole, hold CJK: the cut model may have dropped such
    # characters from a line it was sure of, so every line is read by the whole one: by
    # its head alone, from what the cut one kept.
    lines = len(english) + len(mixed)
    counts = {name: len(counted) for name, counted in widths.items()}
    assert counts == {"whole": 2, "alphabetic": lines - 2, "head": lines - 2}


class _Recogniser:
    """A stand-in recogniser: its reading of line ``i`` is ``texts[i]`` at ``score``."""

    head = None

    def __init__(self, texts: list[str], score: float) -> None:
        self.texts, self.score, self.read_lines = texts, score, 0

    def read(self, lines: list[np.ndarray], batch: int) -> list[LineReading]:
        self.read_lines += len(lines)
        return [LineReading(self.texts[int(line[0, 0, 0])], self.score) for line in lines]


def _noisy_page(alphabetic: list[str], whole: list[str]) -> tuple[PpocrModels, _Recogniser]:
    whole_model = _Recogniser(whole, 0.6)
    alphabetic_model = _Recogniser(alphabetic, 0.5)
    models = PpocrModels(None, None, whole_model, alphabetic_model, 960, 1, 6)  # type: ignore[arg-type]
    crops = [np.full((10, 100 + i % 7, 3), i, np.uint8) for i in range(len(alphabetic))]
    models.read_page(PageLines(crops, 0.0))
    return models, whole_model


def test_a_noisy_page_has_only_enough_of_its_doubtful_lines_read_twice() -> None:
    # A form scanned badly: every line read unsure, every one alphabetic.
    texts = [f"line {i} of a noisy form, read unsure" for i in range(200)]
    _, whole = _noisy_page(texts, texts)
    assert whole.read_lines == PROBE_LINES + math.ceil(DOUBT_CHECK_SHARE * 198)


def test_a_line_that_lost_its_cjk_is_checked_first_among_many_doubtful() -> None:
    texts = [f"line {i} of a noisy form, read unsure" for i in range(200)]
    alphabetic, whole_texts = list(texts), list(texts)
    alphabetic[150], whole_texts[150] = "A.1.1  ", "A.1.1 安装发行版 and a longer tail"
    _, whole = _noisy_page(alphabetic, whole_texts)
    assert whole.read_lines == 200  # another script found: every line read whole
