"""Pages rendered at the engine's resolution: scans at their own (capped), born-digital pages
at the engine's dpi, image inputs never enlarged; and the text-layer modes a page takes."""

from __future__ import annotations

from pathlib import Path

import pikepdf
import pytest
from PIL import Image, ImageDraw

from ocrflow.config import RunConfig
from ocrflow.config.builder import build_run_config
from ocrflow.errors import ConfigError
from ocrflow.render.jobs import PageJob, RenderSpec, decode_image, render_pages
from ocrflow.render.resolution import Resolution

CORPUS = Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus"
LETTER = (8.5, 11.0)
ENGINE = RenderSpec(dpi=300, max_scan_dpi=400, text_layer="off")


def _scan(path: Path, dpi: int, *, inches: tuple[float, float] = LETTER) -> Path:
    """A one-page PDF holding one grey image at ``dpi`` over the whole page."""
    size = (round(inches[0] * dpi), round(inches[1] * dpi))
    page = Image.new("L", size, 255)
    ImageDraw.Draw(page).rectangle((size[0] // 4, size[1] // 4, size[0] // 2, size[1] // 3), 0)
    page.save(path, "PDF", resolution=dpi)
    return path


def _born_digital(path: Path) -> Path:
    with pikepdf.new() as pdf:
        page = pdf.add_blank_page(page_size=(612, 792))
        page.obj.Contents = pdf.make_stream(b"0 g 100 300 200 150 re f")  # not a blank page
        pdf.save(path)
    return path


def _rendered_width(path: Path, spec: RenderSpec, kind: str = "pdf") -> int:
    (page,) = render_pages(PageJob(str(path), kind, (1,), spec))
    assert page.error is None, page.error
    assert page.image is not None
    return decode_image(page.image).width


@pytest.mark.parametrize(("dpi", "expected"), [(200, 200), (300, 300), (600, 400), (72, 72)])
def test_a_scan_is_read_at_its_own_resolution_at_most_the_cap(
    tmp_path: Path, dpi: int, expected: int
) -> None:
    width = _rendered_width(_scan(tmp_path / "scan.pdf", dpi), ENGINE)
    assert width == pytest.approx(8.5 * expected, abs=2)


def test_a_born_digital_page_is_read_at_the_engine_dpi(tmp_path: Path) -> None:
    width = _rendered_width(_born_digital(tmp_path / "page.pdf"), ENGINE)
    assert width == pytest.approx(8.5 * 300, abs=2)


def test_a_pixel_target_ignores_the_scan_resolution(tmp_path: Path) -> None:
    spec = RenderSpec(target_dim=1288, text_layer="off")
    height_px = 1288
    width = _rendered_width(_scan(tmp_path / "scan.pdf", 600), spec)
    assert width == pytest.approx(height_px * 8.5 / 11, abs=2)


def test_a_fixed_dpi_applies_to_scans_too(tmp_path: Path) -> None:
    spec = RenderSpec(dpi=150, text_layer="off")
    assert _rendered_width(_scan(tmp_path / "scan.pdf", 300), spec) == pytest.approx(1275, abs=2)


def test_a_big_page_is_shrunk_to_the_pixel_cap_not_refused(tmp_path: Path) -> None:
    # A 40 x 30 inch poster at 300 dpi would be 108 M px: it is read at what fits.
    path = _scan(tmp_path / "poster.pdf", 50, inches=(40, 30))
    spec = RenderSpec(dpi=300, text_layer="off", max_pixels=4_000_000)
    (page,) = render_pages(PageJob(str(path), "pdf", (1,), spec))
    assert page.image is not None
    assert page.image.width * page.image.height <= 4_000_000
    assert page.image.width > 2000


def test_a_turned_scan_measures_its_true_resolution() -> None:
    # The corpus's skewed scan places its 300-dpi image through a turning matrix.
    path = CORPUS / "pdfs" / "ocrmypdf__skew.pdf"
    width = _rendered_width(path, ENGINE)
    assert width == pytest.approx(8.5 * 300, rel=0.02)


@pytest.mark.parametrize(
    ("stated", "expected_scale"), [(600, 400 / 600), (300, 1.0), (None, 1.0), (72, 1.0)]
)
def test_an_image_input_is_never_enlarged(
    tmp_path: Path, stated: int | None, expected_scale: float
) -> None:
    path = tmp_path / "page.png"
    image = Image.new("RGB", (1200, 1600), "white")
    ImageDraw.Draw(image).rectangle((300, 400, 600, 800), fill="black")  # not a blank page
    image.save(path, dpi=(stated, stated)) if stated else image.save(path)
    width = _rendered_width(path, ENGINE, kind="image")
    assert width == pytest.approx(1200 * expected_scale, abs=2)


@pytest.mark.parametrize("said", [(float("inf"), 300), (float("nan"), 1), (0, 0), ("x", 2)])
def test_a_resolution_a_file_cannot_mean_is_no_resolution(said: tuple[object, ...]) -> None:
    from ocrflow.render.resolution import stated_dpi

    assert stated_dpi({"dpi": said}) is None
    assert ENGINE.resolution.image_scale((1200, 1600), stated_dpi({"dpi": said})) == 1.0


def test_resolution_modes() -> None:
    assert Resolution(1000).pdf_scale(500, 250, 300) == 2.0
    engine = Resolution(1288, dpi=300, max_scan_dpi=400)
    assert engine.pdf_scale(612, 792, 0.0) == 300 / 72
    assert engine.pdf_scale(612, 792, 250) == 250 / 72
    assert engine.pdf_scale(612, 792, 2400) == 400 / 72


@pytest.mark.parametrize(("mode", "ocr"), [("auto", False), ("redo", True), ("off", True)])
def test_redo_reads_again_a_page_whose_text_is_an_earlier_ocr(mode: str, ocr: bool) -> None:
    # Tesseract's "sandwich" output: a scan under invisible text of good quality.
    path = CORPUS / "pdfs" / "pikepdf__sandwich.pdf"
    (page,) = render_pages(PageJob(str(path), "pdf", (1,), RenderSpec(text_layer=mode)))
    assert (page.image is not None) is ocr
    assert page.text_ok


def test_redo_keeps_a_visible_text_layer(tmp_path: Path) -> None:
    path = CORPUS / "pdfs" / "docling__2305.03393v1-pg9.pdf"
    (page,) = render_pages(PageJob(str(path), "pdf", (1,), RenderSpec(text_layer="redo")))
    assert page.image is None and page.text_ok


@pytest.mark.parametrize(
    ("flags", "mode"),
    [({"skip_text": True}, "auto"), ({"force_ocr": True}, "off"), ({"redo_ocr": True}, "redo")],
)
def test_ocrmypdf_flags_are_text_layer_modes(flags: dict[str, bool], mode: str) -> None:
    config: RunConfig = build_run_config(["in"], "out", **flags)
    assert config.route.text_layer == mode


@pytest.mark.parametrize(
    "flags",
    [{"force_ocr": True, "redo_ocr": True}, {"skip_text": True, "text_layer": "only"}],
)
def test_ocrmypdf_flags_that_disagree_are_refused(flags: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="give one"):
        build_run_config(["in"], "out", **flags)


def test_dpi_changes_the_fingerprint_only_when_set() -> None:
    plain = build_run_config(["in"], "out")
    assert "dpi" not in plain.fingerprint_fields()
    assert build_run_config(["in"], "out", dpi=200).fingerprint() != plain.fingerprint()


def test_a_gray_scan_goes_to_the_engine_as_gray_and_a_colour_one_as_colour(
    tmp_path: Path,
) -> None:
    # A third of the bytes held and handed over for a gray page; colour stays colour.
    gray = _scan(tmp_path / "gray.pdf", 200)
    (page,) = render_pages(PageJob(str(gray), "pdf", (1,), ENGINE))
    assert page.image is not None and page.image.mode == "L"
    assert len(page.image.data) == page.image.width * page.image.height
    colour = tmp_path / "colour.png"
    image = Image.new("RGB", (800, 1000), "white")
    ImageDraw.Draw(image).rectangle((100, 100, 400, 300), fill=(200, 30, 30))
    image.save(colour, dpi=(200, 200))
    (page,) = render_pages(PageJob(str(colour), "image", (1,), ENGINE))
    assert page.image is not None and page.image.mode == "RGB"
    # A wire encoding (a VLM's) is left as it was rendered.
    wire = RenderSpec(text_layer="off", encoding="png")
    (page,) = render_pages(PageJob(str(gray), "pdf", (1,), wire))
    assert page.image is not None and page.image.mode == "RGB"


def _rendered_dpi(path: Path, spec: RenderSpec, kind: str = "pdf") -> float | None:
    (page,) = render_pages(PageJob(str(path), kind, (1,), spec))
    assert page.image is not None, page.error
    return page.image.dpi


@pytest.mark.parametrize(("dpi", "expected"), [(200, 200), (600, 400)])
def test_a_rendered_page_says_its_resolution(tmp_path: Path, dpi: int, expected: int) -> None:
    # Tesseract scales its layout analysis by it (engines/tesseract.py).
    assert _rendered_dpi(_scan(tmp_path / "scan.pdf", dpi), ENGINE) == pytest.approx(expected, 0.01)
    assert _rendered_dpi(_born_digital(tmp_path / "page.pdf"), ENGINE) == pytest.approx(300, 0.01)
    # A poster shrunk to the pixel cap says the resolution it was shrunk to.
    poster = _scan(tmp_path / "poster.pdf", 50, inches=(40, 30))
    capped = RenderSpec(dpi=300, text_layer="off", max_pixels=4_000_000)
    assert _rendered_dpi(poster, capped) == pytest.approx((4_000_000 / 1200) ** 0.5, 0.02)


def test_an_image_file_says_the_resolution_it_states(tmp_path: Path) -> None:
    page = Image.new("L", (1275, 1650), 255)
    ImageDraw.Draw(page).rectangle((300, 300, 700, 500), 0)
    page.save(tmp_path / "stated.png", dpi=(150, 150))
    page.save(tmp_path / "silent.png")
    assert _rendered_dpi(tmp_path / "stated.png", ENGINE, "image") == pytest.approx(150, 0.01)
    assert _rendered_dpi(tmp_path / "silent.png", ENGINE, "image") is None


def test_a_stated_resolution_that_is_no_number_is_none() -> None:
    from PIL.TiffImagePlugin import IFDRational

    from ocrflow.render.jobs import _frame_dpi

    page = Image.new("L", (1275, 1650), 255)
    for stated in ((0, 0), (IFDRational(1, 0), 72), ("x", "y"), (), 7, (1e9, 1e9)):
        page.info["dpi"] = stated
        assert _frame_dpi(page, page) is None, stated
    page.info["dpi"] = (150, 150)
    assert _frame_dpi(page, page.resize((638, 825))) == pytest.approx(75, 0.01)
