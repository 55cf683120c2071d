"""olmOCR-2: request shape, strict front matter, rotation, figures."""

from __future__ import annotations

import re

import pytest

from ocrflow.errors import ParseError
from ocrflow.recipes.olmocr import GUIDED_REGEX, PROMPT, TEMPERATURES, OlmocrRecipe

from .helpers import page_image, reply, sample

FRONT = (
    "---\nprimary_language: en\nis_rotation_valid: True\nrotation_correction: 0\n"
    "is_table: False\nis_diagram: False\n---\n"
)


@pytest.fixture
def edgar(corpus) -> str:
    """A real olmOCR-format page from the shared corpus."""
    return (corpus / "groundtruth" / "olmocr__edgar.md").read_text(encoding="utf-8")


def test_parses_real_olmocr_page(edgar: str) -> None:
    page = OlmocrRecipe().parse(reply(edgar))
    assert page.attributes == {
        "primary_language": "en",
        "is_rotation_valid": True,
        "rotation_correction": 0,
        "is_table": True,
        "is_diagram": False,
    }
    assert page.rotation == 0
    assert page.figures == ()
    assert page.markdown.startswith("Edgar (or Eadgar;[1] c. 944 – 8 July 975)")
    assert page.markdown.endswith("especially")
    assert "---" not in page.markdown
    assert page.markdown.count("\n\n") == 2


def test_guided_regex_accepts_real_page(edgar: str) -> None:
    assert re.fullmatch(GUIDED_REGEX, edgar)


def test_request_puts_text_before_image() -> None:
    image = page_image()
    request = OlmocrRecipe().build_request(image, 0, page_key="doc-1:3")
    assert request.image is image
    assert request.image_first is False
    assert request.prompt == PROMPT
    assert request.prompt.startswith("Attached is one page of a document")
    assert request.max_tokens == 8000
    assert request.page_key == "doc-1:3"
    assert request.extra_body == {}


def test_temperature_ladder_by_attempt() -> None:
    recipe = OlmocrRecipe()
    temperatures = [recipe.build_request(page_image(), n).temperature for n in range(10)]
    assert temperatures == [0.1, 0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0, 1.0, 1.0]
    assert recipe.temperatures == TEMPERATURES
    with pytest.raises(ValueError):
        recipe.build_request(page_image(), -1)


def test_max_tokens_override() -> None:
    assert OlmocrRecipe().build_request(page_image(), 0, max_tokens=2048).max_tokens == 2048


def test_guided_decoding_uses_structured_outputs_only_when_enabled() -> None:
    assert "structured_outputs" not in OlmocrRecipe().build_request(page_image(), 0).extra_body
    body = OlmocrRecipe(guided=True).build_request(page_image(), 0).extra_body
    assert body == {"structured_outputs": {"regex": GUIDED_REGEX}}
    assert "guided_regex" not in body


def test_defaults() -> None:
    recipe = OlmocrRecipe()
    assert (recipe.name, recipe.target_dim) == ("olmocr", 1288)
    assert recipe.server_flags == (
        "--max-model-len",
        "16384",
        "--limit-mm-per-prompt",
        '{"video": 0}',
    )


@pytest.mark.parametrize(
    ("correction", "clockwise"),
    [(90, 270), (180, 180), (270, 90)],
)
def test_invalid_rotation_asks_for_a_rerender(correction: int, clockwise: int) -> None:
    text = sample("olmocr_rotated.md").replace(
        "rotation_correction: 90", f"rotation_correction: {correction}"
    )
    page = OlmocrRecipe().parse(reply(text))
    assert page.rotation == clockwise
    assert page.attributes["is_rotation_valid"] is False
    assert page.attributes["rotation_correction"] == correction


def test_correction_is_ignored_when_rotation_is_valid() -> None:
    text = FRONT.replace("rotation_correction: 0", "rotation_correction: 180") + "Upright."
    assert OlmocrRecipe().parse(reply(text)).rotation == 0


def test_blank_page_and_null_language() -> None:
    page = OlmocrRecipe().parse(reply(FRONT.replace("en", "null").rstrip("\n")))
    assert page.markdown == ""
    assert page.attributes["primary_language"] is None


MALFORMED = {
    "no front matter": "Just some text without front matter.",
    "unclosed": FRONT.rsplit("---\n", 1)[0] + "Text",
    "missing key": FRONT.replace("is_diagram: False\n", "") + "Text",
    "unknown key": FRONT.replace("is_table:", "is_tabular:") + "Text",
    "duplicate key": FRONT.replace("is_table: False\n", "is_table: False\nis_table: True\n"),
    "bad boolean": FRONT.replace("is_table: False", "is_table: maybe") + "Text",
    "bad rotation": FRONT.replace("rotation_correction: 0", "rotation_correction: 45"),
    "not key value": FRONT.replace("is_diagram: False", "is_diagram False"),
}


@pytest.mark.parametrize("text", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_front_matter_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError) as caught:
        OlmocrRecipe().parse(reply(text))
    assert caught.value.reason == "parse_error"


def test_cut_off_reply_is_a_parse_error(edgar: str) -> None:
    with pytest.raises(ParseError) as caught:
        OlmocrRecipe().parse(reply(edgar, finish_reason="length"))
    assert caught.value.reason == "truncated"


def test_repetition_loop_is_a_parse_error() -> None:
    with pytest.raises(ParseError) as caught:
        OlmocrRecipe().parse(reply(FRONT + "the table of the " * 200))
    assert caught.value.reason == "repetition"


def test_figure_links_become_figures_when_image_size_is_known() -> None:
    text = sample("olmocr_figure.md")
    page = OlmocrRecipe().parse(reply(text, image_width=1288, image_height=996))
    assert "<!--figure:0-->" in page.markdown
    assert "page_112_340_900_420.png" not in page.markdown
    (figure,) = page.figures
    # Qwen2.5-VL saw the image resized to 1288 x 1008 (multiples of 28).
    assert figure.bbox == pytest.approx((112 / 1288, 340 / 1008, 1012 / 1288, 760 / 1008), abs=1e-6)
    assert figure.placeholder == "<!--figure:0-->"
    assert page.attributes["figure_alts"] == [
        "Line chart of daily mean turbidity from 2019 to 2022"
    ]
    assert "<table>" in page.markdown
    assert r"\(\bar{x}_d = \frac{1}{96}\sum_{i} x_i\)" in page.markdown


def test_figure_links_stay_without_image_size() -> None:
    page = OlmocrRecipe().parse(reply(sample("olmocr_figure.md")))
    assert page.figures == ()
    assert "(page_112_340_900_420.png)" in page.markdown


def test_rotation_undoes_the_turn_olmocr_was_trained_on() -> None:
    """Training turns a page by PIL ``ROTATE_90`` and labels it ``rotation_correction: 270``;
    turning the image clockwise by ``ParsedPage.rotation`` must bring it back upright."""
    from PIL import Image

    upright = Image.new("L", (3, 2))
    upright.putpixel((0, 0), 255)
    turned = upright.transpose(Image.Transpose.ROTATE_90)
    text = sample("olmocr_rotated.md").replace(
        "rotation_correction: 90", "rotation_correction: 270"
    )
    rotation = OlmocrRecipe().parse(reply(text)).rotation
    restored = turned.rotate(-rotation, expand=True)
    assert restored.size == upright.size
    assert restored.tobytes() == upright.tobytes()
