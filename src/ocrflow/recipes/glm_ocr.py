"""GLM-OCR (``zai-org/GLM-OCR``), one request per page: the image, then ``Text Recognition:``.

Written from the authors' SDK, repository zai-org/GLM-OCR at commit
cef4d0ea120d1741f5cefe8985eee45f6c8eff1d:

- Request (``glmocr/dataloader/page_loader.py``, ``build_request_from_image``): one user
  message, the image then the task prompt of ``glmocr/config.yaml``
  (``task_prompt_mapping``): ``Text Recognition:``, ``Table Recognition:`` or
  ``Formula Recognition:`` (``task=`` picks one; ``text`` for whole pages).
- Sampling (``config.yaml``, ``page_loader``): temperature 0, top_p 0.00001, top_k 1,
  repetition_penalty 1.1, max_tokens 8192. Greedy decoding repeats itself on a retry,
  so retries after the first attempt sample (top_p 0.9, no top_k) at rising temperature.
- Image: the SDK renders PDF pages at 200 dpi (at most 3500 px) and lets the server's
  processor resize (``min_pixels`` 12544, ``max_pixels`` 71372800): 2200 px is 200 dpi on
  a Letter page.
- Server (``README.md``, "Using vLLM"): ``--speculative-config '{"method": "mtp",
  "num_speculative_tokens": 3}'``, the multi-token-prediction head the model was trained
  with, used for speculative decoding.
- Output: Markdown, display formulas as ``$$`` blocks, tables as HTML; no boxes (the
  SDK's boxes come from its separate PP-DocLayoutV3 layout step, a two-step pipeline).
- Weights: MIT ("The GLM-OCR model is released under the MIT License", README); the
  SDK code is Apache-2.0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from ocrflow.recipes.base import ParsedPage
from ocrflow.recipes.cards import RecipeCard
from ocrflow.recipes.common import reject_loop, require_stop
from ocrflow.recipes.dots import display_math
from ocrflow.recipes.layout import markdown_blocks
from ocrflow.recipes.markup import TABLES_HTML, convert_tables
from ocrflow.recipes.tasks import TaskPromptRecipe
from ocrflow.recipes.text import normalize_whitespace, strip_code_fence, strip_meta_tokens
from ocrflow.types import Block, BlockLabel, EngineReply

#: ``task_prompt_mapping`` of ``glmocr/config.yaml``, word for word.
TASK_PROMPTS: Mapping[str, str] = MappingProxyType(
    {
        "text": "Text Recognition:",
        "table": "Table Recognition:",
        "formula": "Formula Recognition:",
    }
)
#: The README's vLLM flag: speculative decoding with the model's MTP head.
SERVER_FLAGS = ("--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}')
#: The SDK's decoding (``page_loader`` in ``config.yaml``).
GREEDY = MappingProxyType({"top_p": 0.00001, "top_k": 1, "repetition_penalty": 1.1})
RETRY = MappingProxyType({"top_p": 0.9, "repetition_penalty": 1.1})

CARD = RecipeCard(
    models=("zai-org/GLM-OCR",),
    boxes=False,
    licence="MIT",
    notes="one page per request; the SDK's layout step (boxes) is not used",
)


@dataclass(frozen=True, slots=True)
class GlmOcrRecipe(TaskPromptRecipe):
    """GLM-OCR: image then task prompt; greedy first, Markdown (or one table/formula)."""

    TASK_PROMPTS: ClassVar[Mapping[str, str]] = TASK_PROMPTS

    model: str = ""
    name: str = "glm-ocr"
    task: str = "text"
    target_dim: int = 2200
    temperatures: tuple[float, ...] = (0.0, 0.2, 0.3, 0.5, 0.7)
    max_tokens: int = 8192
    server_flags: tuple[str, ...] = SERVER_FLAGS
    table_format: str = TABLES_HTML

    def extra_body(self, attempt: int) -> dict[str, Any]:
        """The SDK's greedy decoding first; nucleus sampling on retries."""
        return dict(GREEDY if attempt == 0 else RETRY)

    def parse(self, reply: EngineReply) -> ParsedPage:
        """The reply's Markdown, tidied; one table or formula block for those tasks."""
        require_stop(reply)
        text = strip_code_fence(strip_meta_tokens(reply.text).strip())
        if self.task == "formula":
            markdown = display_math(text)
            blocks: tuple[Block, ...] = (Block(BlockLabel.FORMULA, markdown),) if markdown else ()
        else:
            markdown = normalize_whitespace(convert_tables(text, self.table_format))
            blocks = markdown_blocks(markdown)
        reject_loop(markdown)
        return ParsedPage(markdown, 0, blocks=blocks)
