"""PaddleOCR-VL (``PaddlePaddle/PaddleOCR-VL``, 1.5, 1.6), one request per page.

Written from the authors' pipeline, repository PaddlePaddle/PaddleX:

- Request (``paddlex/inference/pipelines/paddleocr_vl/pipeline.py`` at commit
  a9e4850abb21fd2916f1aa11556b79d325f042fd): with layout detection off, the whole page
  is one block read with the prompt of ``prompt_label``: ``OCR:`` (``ocr``),
  ``Table Recognition:``, ``Formula Recognition:`` or ``Chart Recognition:``; the image
  comes before the prompt. ``task=`` picks the element prompt.
- Output, as that pipeline post-processes it (``get_layout_parsing_results``): LaTeX
  written ``\\(...\\)``/``\\[...\\]`` becomes ``$...$``/``$$...$$``; a table comes as OTSL
  (``<fcel>``, ``<lcel>``, ``<ucel>``, ``<xcel>``, ``<ecel>``, ``<nl>``) and is turned into
  HTML as ``convert_otsl_to_html`` in ``uilts.py`` (commit 2f7be6dd8b94fc8b3345a3756fc8d4429867558a)
  does (``recipes/otsl.py``). No boxes: the pipeline's boxes come from its separate
  PP-DocLayoutV2 layout model (a two-step pipeline).
- Sampling: greedy (the pipeline's documented defaults: temperature 0, top_p 1,
  repetition_penalty 1; the model's generation config sets none); retries warm up.
  ``max_new_tokens`` defaults to 4096 a block there; a whole page gets 8192.
- Image: the model's processor keeps at most 2,822,400 pixels (``max_pixels``, factor 28);
  1960 px on the long side of an A4 or Letter page stays within it.
- Server (``paddlex/inference/genai/configs/paddleocr_vl_09b.py`` at commit
  2e348210520130c6525150f74c9753b0ee7972f1, which 1.6 reuses): ``--trust-remote-code
  --max-model-len 16384 --max-num-batched-tokens 131072`` (its memory share and API
  server count are left to the deployment).
- Weights: Apache-2.0 (the model card).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from ocrflow.errors import ParseError
from ocrflow.recipes.base import ParsedPage
from ocrflow.recipes.cards import RecipeCard
from ocrflow.recipes.common import MALFORMED, reject_loop, require_stop
from ocrflow.recipes.dots import display_math
from ocrflow.recipes.layout import markdown_blocks
from ocrflow.recipes.markup import TABLES_HTML, convert_tables
from ocrflow.recipes.otsl import has_otsl, otsl_to_html
from ocrflow.recipes.tasks import TaskPromptRecipe
from ocrflow.recipes.text import normalize_whitespace, strip_code_fence, strip_meta_tokens
from ocrflow.types import Block, BlockLabel, EngineReply

#: The element prompts of PaddleX's pipeline, word for word, by ``prompt_label``.
TASK_PROMPTS: Mapping[str, str] = MappingProxyType(
    {
        "ocr": "OCR:",
        "table": "Table Recognition:",
        "formula": "Formula Recognition:",
        "chart": "Chart Recognition:",
    }
)
SERVER_FLAGS = (
    "--trust-remote-code",
    "--max-model-len",
    "16384",
    "--max-num-batched-tokens",
    "131072",
)
_INLINE_MATH = re.compile(r"\\\(|\\\)")
_DISPLAY_MATH = re.compile(r"\\\[|\\\]")

CARD = RecipeCard(
    models=(
        "PaddlePaddle/PaddleOCR-VL",
        "PaddlePaddle/PaddleOCR-VL-1.5",
        "PaddlePaddle/PaddleOCR-VL-1.6",
    ),
    boxes=False,
    # "license: apache-2.0" in the card's metadata (https://huggingface.co/PaddlePaddle/PaddleOCR-VL).
    licence="Apache-2.0",
    notes="one page per request with an element prompt; the layout step is not used",
)


@dataclass(frozen=True, slots=True)
class PaddleocrVlRecipe(TaskPromptRecipe):
    """PaddleOCR-VL: image then element prompt; text, an OTSL table, a formula or a chart."""

    TASK_PROMPTS: ClassVar[Mapping[str, str]] = TASK_PROMPTS

    model: str = ""
    name: str = "paddleocr-vl"
    task: str = "ocr"
    target_dim: int = 1960
    temperatures: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.5)
    max_tokens: int = 8192
    server_flags: tuple[str, ...] = SERVER_FLAGS
    table_format: str = TABLES_HTML

    def extra_body(self, attempt: int) -> dict[str, Any]:
        """The pipeline's defaults: no nucleus cut, no repetition penalty."""
        return {"top_p": 1.0, "repetition_penalty": 1.0}

    def parse(self, reply: EngineReply) -> ParsedPage:
        """The reply as the pipeline reads it, in Markdown with its one kind of block."""
        require_stop(reply)
        text = normalize_math(strip_code_fence(strip_meta_tokens(reply.text).strip()))
        if self.task == "formula":
            markdown = display_math(text.replace("$$", "").strip())
            blocks: tuple[Block, ...] = (Block(BlockLabel.FORMULA, markdown),) if markdown else ()
        elif self.task == "table":
            markdown = self._table(text)
            blocks = (Block(BlockLabel.TABLE, markdown),)
        else:
            markdown = normalize_whitespace(convert_tables(text, self.table_format))
            blocks = markdown_blocks(markdown)
        reject_loop(markdown)
        return ParsedPage(markdown, 0, blocks=blocks)

    def _table(self, text: str) -> str:
        """An OTSL (or already HTML) table in ``table_format``; ``ParseError`` without one."""
        html = otsl_to_html(text) if has_otsl(text) else text
        if "<table" not in html:
            raise ParseError("table reply holds no OTSL or HTML table", reason=MALFORMED)
        return normalize_whitespace(convert_tables(html, self.table_format))


def normalize_math(text: str) -> str:
    """LaTeX delimiters as the pipeline rewrites them: when the reply uses ``\\(...\\)`` or
    ``\\[...\\]``, its ``$`` signs go and those delimiters become ``$``/``$$``."""
    inline = "\\(" in text and "\\)" in text
    display = "\\[" in text and "\\]" in text
    if not (inline or display):
        return text
    text = text.replace("$", "")
    return _DISPLAY_MATH.sub(" $$ ", _INLINE_MATH.sub(" $ ", text))
