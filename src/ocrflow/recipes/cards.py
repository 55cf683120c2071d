"""What ``ocrflow recipes`` tells about each recipe: its models, boxes and the weights' licence.

A recipe's request data (prompt, image size, sampling, server flags) is read from the
recipe itself (``describe``); its card adds what the recipe object cannot say: which
models it reads, whether it gives boxes and under which licence the weights come. New
recipe modules define their ``CARD`` next to the recipe; the cards of the recipes that
predate this module live here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: How many words of the prompt ``describe`` shows.
PROMPT_WORDS = 8


@dataclass(frozen=True, slots=True)
class RecipeCard:
    """What a recipe is for, as its models' authors state it."""

    #: Hugging Face ids of the models the recipe reads (the first is the reference one).
    models: tuple[str, ...]
    #: Whether the recipe fills blocks with boxes (some modes only: see ``notes``).
    boxes: bool
    #: The weights' licence as the model card states it.
    licence: str
    notes: str = ""


OLMOCR_CARD = RecipeCard(
    models=("allenai/olmOCR-2-7B-1025", "allenai/olmOCR-2-7B-1025-FP8"),
    boxes=False,
    # allenai/olmocr README "License": "olmOCR is licensed under Apache 2.0" (commit
    # f7cfe4c22098b154c76b6ec950d1c0a464eecf8d); the olmOCR model cards say
    # "license: apache-2.0" (e.g. https://huggingface.co/allenai/olmOCR-7B-0825-FP8).
    licence="Apache-2.0",
    notes="figures only: the YAML front matter gives no block boxes",
)
DEEPSEEK_CARD = RecipeCard(
    # DeepSeek-OCR 2 first: the current model (recipes/deepseek.py, ``deepseek_recipe``).
    models=("deepseek-ai/DeepSeek-OCR-2", "deepseek-ai/DeepSeek-OCR"),
    boxes=True,
    # DeepSeek-OCR-2: "license: apache-2.0" on its card and LICENSE.txt of
    # deepseek-ai/DeepSeek-OCR-2 (commit 2f3699ebbb96fa8af32212e8c170f2cc28730fad);
    # DeepSeek-OCR: "license: mit" on https://huggingface.co/deepseek-ai/DeepSeek-OCR.
    licence="Apache-2.0 (DeepSeek-OCR-2); MIT (DeepSeek-OCR)",
    notes="grounding prompt: <|ref|>label<|/ref|><|det|>[[box]]<|/det|> on a 0-999 grid",
)
DOTS_CARD = RecipeCard(
    # dots.mocr (dots.ocr-1.5) first: the authors' current model. It keeps dots.ocr's
    # layout prompt, JSON cells and sampling (rednote-hilab/dots.ocr at
    # 36d7248878f181c6257dc1cbd799ae940970444f: dots_ocr/utils/prompts.py,
    # dots_ocr/model/inference.py); its server adds one flag (recipes/dots.py).
    models=("rednote-hilab/dots.mocr", "rednote-hilab/dots.ocr"),
    boxes=True,
    # The repository's LICENSE (MIT) plus its model licence agreement (file "dots.ocr
    # LICENSE AGREEMENT", titled "dots.mocr LICENSE AGREEMENT" at the commit above).
    licence="MIT with the dots.ocr/dots.mocr licence agreement's terms",
    notes="JSON cells; boxes in pixels of the smart-resized image",
)
CHANDRA_CARD = RecipeCard(
    # Chandra 2 first: chandra-ocr 0.2.0's default checkpoint (recipes/chandra2.py).
    models=("datalab-to/chandra-ocr-2", "datalab-to/chandra"),
    boxes=True,
    # "license: openrail", "license_link: LICENSE" on
    # https://huggingface.co/datalab-to/chandra-ocr-2: the "AI PUBS OPEN RAIL-M LICENSE
    # (MODIFIED)" that is also MODEL_LICENSE of datalab-to/chandra (commit a6928a2).
    licence="OpenRAIL-M (modified; see the card)",
    notes="HTML layout blocks; boxes on a 0-1000 grid (0-1024 for Chandra 1)",
)
MARKDOWN_CARD = RecipeCard(
    models=(
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "Qwen/Qwen3-VL-8B-Instruct",
        "nanonets/Nanonets-OCR2-3B",
    ),
    boxes=False,
    # Any VLM: no single licence, each model's own card.
    licence="per model (see its card)",
    notes="any VLM answering in Markdown",
)


def describe(name: str, recipe: Any, card: RecipeCard) -> dict[str, Any]:
    """One row of ``ocrflow recipes``: ``recipe`` (built for ``card.models[0]``) and its
    card as plain JSON values."""
    prompt = getattr(recipe, "prompt", None)
    sampling: dict[str, Any] = {"temperatures": list(getattr(recipe, "temperatures", ()))}
    extra = getattr(recipe, "extra_body", None)
    if callable(extra):
        sampling |= {k: v for k, v in extra(0).items() if _is_plain(v)}
    sampling["max_tokens"] = getattr(recipe, "max_tokens", None)
    return {
        "name": name,
        "models": list(card.models),
        "prompt": _first_words(prompt),
        "image_size": getattr(recipe, "target_dim", None),
        "sampling": sampling,
        "vllm_flags": list(getattr(recipe, "server_flags", ())),
        "boxes": card.boxes,
        "licence": card.licence,
        "notes": card.notes,
    }


def _first_words(prompt: object) -> str:
    """The prompt's first ``PROMPT_WORDS`` words (meta tokens kept); "(image only)" for none."""
    if not isinstance(prompt, str) or not prompt.strip():
        return "(image only)"
    words = prompt.split()
    more = " ..." if len(words) > PROMPT_WORDS else ""
    return " ".join(words[:PROMPT_WORDS]) + more


def _is_plain(value: object) -> bool:
    """Whether ``value`` is a JSON scalar (sampling fields; nested request options are not)."""
    return isinstance(value, str | int | float | bool)
