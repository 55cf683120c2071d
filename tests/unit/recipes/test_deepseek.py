"""DeepSeek-OCR: grounding and free modes, figures on the 0-999 grid, clean-up."""

from __future__ import annotations

import pytest

from ocrflow.errors import ParseError
from ocrflow.recipes.deepseek import (
    NGRAM_ARGS,
    OCR2_SETTINGS,
    SERVER_FLAGS,
    DeepseekRecipe,
    deepseek_recipe,
    is_ocr2,
)
from ocrflow.recipes.registry import recipe_for_model

from .helpers import page_image, reply, sample


@pytest.fixture
def grounded() -> str:
    return sample("deepseek_grounding.txt")


def test_grounding_reply_becomes_markdown(grounded: str) -> None:
    page = DeepseekRecipe().parse(reply(grounded))
    blocks = page.markdown.split("\n\n")
    assert blocks[:3] == [
        "# Annual Water Quality Report 2023",
        "## 1. Source of supply",
        "Riverton draws its drinking water from the Clearfork Reservoir and two groundwater "
        "wells. In 2023 the treatment plant delivered an average of 14.2 million litres per day "
        "to 38,000 residents.",
    ]
    assert "<!--figure:0-->" in blocks
    assert "Figure 1: Monthly turbidity at the reservoir intake" in blocks
    assert "\\[\n\\mathrm{CT} = C \\times T_{10}\n\\]" in page.markdown
    assert page.rotation == 0


def test_meta_tokens_and_centering_are_gone(grounded: str) -> None:
    markdown = DeepseekRecipe().parse(reply(grounded)).markdown
    for leftover in ("<|ref|>", "<|det|>", "[[", "end▁of▁sentence", "<center>", "</center>"):
        assert leftover not in markdown


def test_header_and_footer_are_attributes(grounded: str) -> None:
    page = DeepseekRecipe().parse(reply(grounded))
    assert page.attributes == {
        "page_header": ["City of Riverton Public Works"],
        "page_footer": ["Page 2"],
    }
    assert "Public Works" not in page.markdown
    assert "Page 2" not in page.markdown


def test_image_regions_become_scaled_figures(grounded: str) -> None:
    (figure,) = DeepseekRecipe().parse(reply(grounded)).figures
    assert figure.bbox == pytest.approx((140 / 999, 500 / 999, 860 / 999, 780 / 999), abs=1e-6)
    assert figure.label == "image"
    assert figure.placeholder == "<!--figure:0-->"


def test_empty_placeholder_table_cells_are_cleaned(grounded: str) -> None:
    markdown = DeepseekRecipe().parse(reply(grounded)).markdown
    assert (
        "<table><tr><td>Contaminant</td><td>Unit</td><td>Level found</td><td>Limit</td></tr>"
        "<tr><td>Nitrate</td><td>mg/L</td><td>2.1</td><td>10</td></tr>"
        "<tr><td>Fluoride</td><td>mg/L</td><td>0.7</td><td>4</td></tr>"
        "<tr><td>Lead</td><td>µg/L</td><td>3</td><td>15</td></tr></table>"
    ) in markdown
    assert "<td></td>" not in markdown


def test_tables_as_markdown_on_request(grounded: str) -> None:
    markdown = DeepseekRecipe(table_format="markdown").parse(reply(grounded)).markdown
    assert "| Contaminant | Unit | Level found | Limit |\n| --- | --- | --- | --- |" in markdown


def test_several_boxes_make_several_figures() -> None:
    text = "<|ref|>image<|/ref|><|det|>[[0, 0, 499, 499], [500, 500, 999, 999]]<|/det|>\n"
    page = DeepseekRecipe().parse(reply(text))
    assert [f.placeholder for f in page.figures] == ["<!--figure:0-->", "<!--figure:1-->"]
    assert page.figures[1].bbox == pytest.approx((500 / 999, 500 / 999, 1.0, 1.0))
    assert page.markdown == "<!--figure:0-->\n\n<!--figure:1-->"


def test_image_region_without_box_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        DeepseekRecipe().parse(reply("<|ref|>image<|/ref|><|det|>[[12, 40]]<|/det|>"))


def test_free_mode() -> None:
    recipe = DeepseekRecipe(mode="free")
    assert recipe.build_request(page_image(), 0).prompt == "Free OCR."
    page = recipe.parse(reply(sample("deepseek_free.txt")))
    assert page.markdown.startswith("# Annual Water Quality Report 2023\n\n")
    assert (
        "<table><tr><td>Contaminant</td><td>Level found</td></tr>"
        "<tr><td>Nitrate</td><td>2.1 mg/L</td></tr></table>"
    ) in page.markdown
    assert page.markdown.endswith(r"The CT value is \( C \times T_{10} \).")
    assert page.figures == ()


def test_request_image_first_with_vllm_extras() -> None:
    request = DeepseekRecipe().build_request(page_image(640, 480), 0)
    assert request.image_first is True
    assert request.prompt == "<|grounding|>Convert the document to markdown."
    assert request.temperature == 0.0
    assert request.max_tokens == 7000
    assert request.extra_body == {
        "skip_special_tokens": False,
        "vllm_xargs": {
            "ngram_size": 30,
            "window_size": 90,
            "whitelist_token_ids": [128821, 128822],
        },
    }


def test_request_extras_are_fresh_each_time() -> None:
    recipe = DeepseekRecipe()
    first = recipe.build_request(page_image(), 0)
    first.extra_body["vllm_xargs"]["whitelist_token_ids"].append(1)
    again = recipe.build_request(page_image(), 1).extra_body["vllm_xargs"]
    assert again["whitelist_token_ids"] == [128821, 128822]
    assert NGRAM_ARGS["whitelist_token_ids"] == (128821, 128822)


def test_defaults() -> None:
    recipe = DeepseekRecipe()
    assert (recipe.name, recipe.target_dim) == ("deepseek", 640)
    assert recipe.server_flags == SERVER_FLAGS
    flags = " ".join(recipe.server_flags)
    assert (
        "--logits_processors vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor"
        in flags
    )
    assert "--no-enable-prefix-caching" in flags
    assert "--mm-processor-cache-gb 0" in flags
    assert "--max-model-len 8192" in flags
    assert DeepseekRecipe(target_dim=1024).target_dim == 1024


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode"):
        DeepseekRecipe(mode="gundam")


def test_cut_off_reply_is_a_parse_error(grounded: str) -> None:
    with pytest.raises(ParseError) as caught:
        DeepseekRecipe().parse(reply(grounded, finish_reason="length"))
    assert caught.value.reason == "truncated"


def test_loop_inside_a_region_is_a_parse_error() -> None:
    text = "<|ref|>text<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>\n" + "the the " * 100
    with pytest.raises(ParseError) as caught:
        DeepseekRecipe().parse(reply(text))
    assert caught.value.reason == "repetition"


OCR2 = "deepseek-ai/DeepSeek-OCR-2"


def test_deepseek_ocr2_request_follows_its_vllm_runner() -> None:
    recipe = recipe_for_model(OCR2)
    assert isinstance(recipe, DeepseekRecipe) and recipe.name == "deepseek"
    request = recipe.build_request(page_image(1224, 1584), 0)
    # run_dpsk_ocr2_pdf.py: NoRepeatNGramLogitsProcessor(ngram_size=20, window_size=50, ...)
    assert request.extra_body == {
        "skip_special_tokens": False,
        "vllm_xargs": {
            "ngram_size": 20,
            "window_size": 50,
            "whitelist_token_ids": [128821, 128822],
        },
    }
    assert (request.max_tokens, request.temperature) == (8192, 0.0)
    # config.py: the same prompt as DeepSeek-OCR; the page at 144 dpi for the 768 px tiling.
    assert request.prompt == "<|grounding|>Convert the document to markdown."
    assert recipe.target_dim == OCR2_SETTINGS["target_dim"] == 1584
    assert recipe.server_flags == SERVER_FLAGS


def test_deepseek_ocr1_keeps_its_settings() -> None:
    recipe = recipe_for_model("deepseek-ai/DeepSeek-OCR")
    assert (recipe.target_dim, recipe.max_tokens) == (640, 7000)
    xargs = recipe.build_request(page_image(), 0).extra_body["vllm_xargs"]
    assert (xargs["ngram_size"], xargs["window_size"]) == (30, 90)
    assert recipe == DeepseekRecipe(model="deepseek-ai/DeepSeek-OCR")


@pytest.mark.parametrize(
    ("model", "ocr2"),
    [
        (OCR2, True),
        ("/models/deepseek_ocr2", True),
        ("DeepSeek-OCR-2-oQ8", True),
        ("deepseek-ai/DeepSeek-OCR", False),
        ("deepseek-ocr-20b-fake", False),
    ],
)
def test_ocr2_is_told_by_the_model_id(model: str, ocr2: bool) -> None:
    assert is_ocr2(model) is ocr2


def test_ocr2_options_and_modes() -> None:
    free = deepseek_recipe(OCR2, mode="free", target_dim=1024)
    assert free.build_request(page_image(), 1).prompt == "Free OCR."
    assert (free.target_dim, free.max_tokens, free.window_size) == (1024, 8192, 50)
    with pytest.raises(ValueError, match="mode"):
        deepseek_recipe(OCR2, mode="gundam")


def test_ocr2_reads_the_same_grounded_reply(grounded: str) -> None:
    assert recipe_for_model(OCR2).parse(reply(grounded)) == DeepseekRecipe().parse(reply(grounded))
