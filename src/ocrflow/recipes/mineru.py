"""MinerU2.5 (``opendatalab/MinerU2.5-2509-1.2B``): two steps, layout then one crop per block.

Written from the authors' two-step client, repository opendatalab/mineru-vl-utils at commit
abb57de7386e4313f270cb14c088f7611301fc30, ``mineru_vl_utils/mineru_client.py``:

- **Layout** (``prepare_for_layout``): the page resized to exactly 1036 x 1036 px
  (``layout_image_size``, bicubic), image first, prompt ``"\\nLayout Detection:"``. The
  reply is one line per block (``_layout_re``)::

      <|box_start|>132 068 859 267<|box_end|><|ref_start|>text<|ref_end|><|rotate_up|>

  boxes on a 0-1000 grid of the page (``_convert_bbox``: out of range or empty boxes are
  dropped), a type of ``BLOCK_TYPES`` (``unknown`` is read as ``image``, ``inline_formula``
  skipped), a rotation token and, for text, ``txt_contd_tgt`` when the block continues the
  previous one. Text and equations inside a table (90 % of their area) are dropped.
- **Crops** (``prepare_for_extract``): each block cut from the page at its rendered
  resolution, turned by its angle, padded when one side is over 50 times the other and
  enlarged when a side is under 28 px (``resize_by_need``), then read with its type's prompt:
  ``"\\nTable Recognition:"``, ``"\\nFormula Recognition:"``, else ``"\\nText Recognition:"``.
  ``list``, ``equation_block``, ``image_block`` and (without image analysis, the default)
  ``image``/``chart`` blocks are not read; captions inside an image are dropped.
- **Sampling** (``DEFAULT_SAMPLING_PARAMS``, ``http_client.py``): temperature 0, top_p 0.01,
  top_k 1, repetition_penalty 1, ``no_repeat_ngram_size`` 100 through ``vllm_xargs`` (the
  ``mineru_vl_utils:MinerULogitsProcessor`` server flag, from the README), special tokens
  kept; crops add presence_penalty 1.0 and frequency_penalty 0.05 (tables 0.005). The
  client sends the system prompt "You are a helpful assistant.", which the model's Qwen2-VL
  chat template adds by itself.
- **Output** (``post_process``, ``json2markdown.py``): tables come as OTSL and become HTML;
  blocks are joined with blank lines, a continued text block joins the previous one.
- Pages: MinerU renders PDF pages at 200 dpi (2339 px on A4's long side).
- Weights: AGPL-3.0 (the model card).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from PIL import Image

from ocrflow.errors import ParseError
from ocrflow.recipes.base import ParsedPage, StepAnswer, StepRequest, pick_temperature
from ocrflow.recipes.cards import RecipeCard
from ocrflow.recipes.common import MALFORMED, reject_loop, require_stop
from ocrflow.recipes.layout import FigureSet
from ocrflow.recipes.markup import TABLES_HTML, check_table_format, convert_tables
from ocrflow.recipes.mineru_blocks import (
    LayoutBlock,
    assemble,
    filter_captions,
    parse_layout,
    to_read,
)
from ocrflow.recipes.otsl import has_otsl, otsl_to_html
from ocrflow.recipes.text import normalize_whitespace, strip_code_fence, strip_meta_tokens
from ocrflow.render.jobs import decode_image, encode_image
from ocrflow.types import EngineReply, PageImage, PageRequest

LAYOUT_PROMPT = "\nLayout Detection:"
#: The crop prompt of each block type (``DEFAULT_PROMPTS``); others get ``[default]``'s.
BLOCK_PROMPTS: Mapping[str, str] = {
    "table": "\nTable Recognition:",
    "equation": "\nFormula Recognition:",
}
DEFAULT_PROMPT = "\nText Recognition:"
LAYOUT_SIZE = (1036, 1036)
MIN_EDGE, MAX_EDGE_RATIO = 28, 50
SERVER_FLAGS = ("--logits-processors", "mineru_vl_utils:MinerULogitsProcessor")

CARD = RecipeCard(
    models=("opendatalab/MinerU2.5-2509-1.2B",),
    boxes=True,
    # The MinerU2.5-2509-1.2B card's licence as released (AGPL-3.0, MinerU's licence then;
    # also what Voxel51's model-zoo page for the card lists). Not re-read from the card
    # itself here: MinerU's *code* moved to the Apache-2.0-based "MinerU Open Source
    # License" in 3.1.0 (opendatalab/MinerU README, commit 79d6d8d7); check the card
    # (https://huggingface.co/opendatalab/MinerU2.5-2509-1.2B) before relying on it.
    licence="AGPL-3.0",
    notes="two steps: layout on a 1036x1036 page, then one request per block crop",
)


@dataclass(frozen=True, slots=True)
class MineruRecipe:
    """MinerU2.5: the layout request is the page's request; each block is a further step."""

    model: str = ""
    name: str = "mineru"
    #: Longest side of the rendered page the crops are cut from (200 dpi on A4).
    target_dim: int = 2339
    temperatures: tuple[float, ...] = (0.0, 0.1, 0.2)
    max_tokens: int = 4096
    #: Output budget of one block crop.
    block_max_tokens: int = 4096
    #: Attempts each crop gets before its block is marked failed.
    block_attempts: int = 2
    server_flags: tuple[str, ...] = SERVER_FLAGS
    table_format: str = TABLES_HTML
    image_first = True

    def __post_init__(self) -> None:
        check_table_format(self.table_format)
        if self.block_attempts < 1:
            raise ValueError(f"block_attempts must be >= 1, got {self.block_attempts}")

    @property
    def prompt(self) -> str:
        """The layout prompt (``ocrflow recipes`` shows it)."""
        return LAYOUT_PROMPT

    def extra_body(self, attempt: int) -> dict[str, Any]:
        """The layout step's sampling (``MinerUSamplingParams`` defaults)."""
        return _sampling(0.0, 0.0)

    # -- step 1: layout ------------------------------------------------------------------
    def first_image(self, image: PageImage) -> PageImage:
        """The layout image: the page stretched to 1036 x 1036 px, as the client sends it."""
        picture = decode_image(image).convert("RGB")
        return encode_image(picture.resize(LAYOUT_SIZE, Image.Resampling.BICUBIC), "png")

    def build_request(
        self, image: PageImage, attempt: int, *, max_tokens: int | None = None, page_key: str = ""
    ) -> PageRequest:
        """The layout request for ``image`` (already the layout image)."""
        return PageRequest(
            image=image,
            prompt=LAYOUT_PROMPT,
            image_first=True,
            temperature=pick_temperature(self.temperatures, attempt),
            max_tokens=max_tokens or self.max_tokens,
            extra_body=self.extra_body(attempt),
            page_key=page_key,
        )

    def parse(self, reply: EngineReply) -> ParsedPage:
        """The layout: its blocks (boxes, no text yet); ``ParseError`` when it has none."""
        require_stop(reply)
        layout = parse_layout(reply.text)
        if not layout:
            raise ParseError("the layout reply holds no block", reason=MALFORMED)
        rows = [block.to_json() for block in layout]
        return ParsedPage("", 0, {"layout": rows}, ())

    # -- step 2: one request per block ---------------------------------------------------
    def step_requests(self, page: PageImage, parsed: ParsedPage) -> tuple[StepRequest, ...]:
        """The block crops to read, cut from the page as rendered (CPU: run in a thread)."""
        layout = filter_captions(_layout_of(parsed))
        picture = decode_image(page).convert("RGB")
        steps = []
        for index in to_read(layout):
            block = layout[index]
            crop = _crop(picture, block)
            if crop is None:
                continue
            steps.append(StepRequest(f"b{index}", encode_image(crop, "png"), block.type))
        return tuple(steps)

    def build_step_request(self, step: StepRequest, attempt: int) -> PageRequest:
        """The crop request: its type's prompt and sampling."""
        frequency = 0.005 if step.kind == "table" else 0.05
        return PageRequest(
            image=step.image,
            prompt=BLOCK_PROMPTS.get(step.kind, DEFAULT_PROMPT),
            image_first=True,
            temperature=pick_temperature(self.temperatures, attempt),
            max_tokens=self.block_max_tokens,
            extra_body=_sampling(1.0, frequency),
        )

    @property
    def step_attempts(self) -> int:
        """Attempts of one crop before its block is marked failed."""
        return self.block_attempts

    def parse_step(self, step: StepRequest, reply: EngineReply) -> str:
        """A crop's content as Markdown; ``ParseError`` for a cut or looping reply."""
        require_stop(reply)
        text = strip_meta_tokens(reply.text).strip()
        text = strip_code_fence(text).strip()
        if step.kind == "table":
            html = otsl_to_html(text) if has_otsl(text) else text
            text = convert_tables(html, self.table_format) if "<table" in html else html
        reject_loop(text)
        return normalize_whitespace(text)

    def combine(self, parsed: ParsedPage, answers: Mapping[str, StepAnswer]) -> ParsedPage:
        """The page from its layout and its blocks' answers (a failed block is marked)."""
        layout = filter_captions(_layout_of(parsed))
        figures = FigureSet()
        markdown, blocks, attributes = assemble(layout, answers, figures)
        attributes = {**parsed.attributes, **attributes, **figures.attributes()}
        return ParsedPage(markdown, 0, attributes, tuple(figures.figures), blocks)


def _sampling(presence: float, frequency: float) -> dict[str, Any]:
    return {
        "top_p": 0.01,
        "top_k": 1,
        "presence_penalty": presence,
        "frequency_penalty": frequency,
        "repetition_penalty": 1.0,
        "skip_special_tokens": False,
        "vllm_xargs": {"no_repeat_ngram_size": 100},
    }


def _layout_of(parsed: ParsedPage) -> list[LayoutBlock]:
    return [LayoutBlock.from_json(row) for row in parsed.attributes.get("layout", ())]


def _crop(picture: Image.Image, block: LayoutBlock) -> Image.Image | None:
    """The block cut from the page, turned upright and sized as ``resize_by_need`` does."""
    width, height = picture.size
    x0, y0, x1, y1 = block.bbox
    crop = picture.crop((x0 * width, y0 * height, x1 * width, y1 * height))
    if crop.width < 1 or crop.height < 1:
        return None
    if block.angle in (90, 180, 270):
        crop = crop.rotate(block.angle, expand=True)
    if max(crop.size) / min(crop.size) > MAX_EDGE_RATIO:
        w, h = crop.size
        size = (w, math.ceil(w / MAX_EDGE_RATIO)) if w > h else (math.ceil(h / MAX_EDGE_RATIO), h)
        padded = Image.new(crop.mode, size, (255, 255, 255))
        padded.paste(crop, ((size[0] - w) // 2, (size[1] - h) // 2))
        crop = padded
    if min(crop.size) < MIN_EDGE:
        scale = MIN_EDGE / min(crop.size)
        size = (math.ceil(crop.width * scale), math.ceil(crop.height * scale))
        crop = crop.resize(size, Image.Resampling.BICUBIC)
    return crop
