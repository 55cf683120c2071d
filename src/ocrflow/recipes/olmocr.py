"""olmOCR-2 (``allenai/olmOCR-2-7B-1025-FP8``): YAML front matter, then Markdown.

Prompt, image size, token budget and temperature ladder follow allenai/olmocr
(``olmocr/prompts/prompts.py`` ``build_no_anchoring_v4_yaml_prompt`` and
``olmocr/pipeline.py``). The reply is::

    ---
    primary_language: en
    is_rotation_valid: True
    rotation_correction: 0
    is_table: False
    is_diagram: False
    ---
    Markdown text (tables in HTML, equations in LaTeX) ...

The front matter is parsed strictly: exactly these five keys, each once, each valid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from ocrflow.errors import ParseError
from ocrflow.recipes.base import ChatRecipe, ParsedPage
from ocrflow.recipes.common import MALFORMED, reject_loop, require_stop
from ocrflow.recipes.layout import (
    FigureSet,
    is_area,
    markdown_blocks,
    reply_image_size,
    scale_box,
    smart_resize,
)
from ocrflow.recipes.markup import TABLES_HTML, check_table_format, convert_tables
from ocrflow.recipes.text import normalize_whitespace
from ocrflow.types import EngineReply

#: The olmOCR-2 "v4 YAML" prompt, word for word: the model was fine-tuned on it.
PROMPT = (
    "Attached is one page of a document that you must process. "
    "Just return the plain text representation of this document as if you were reading it "
    "naturally. Convert equations to LateX and tables to HTML.\n"
    "If there are any figures or charts, label them with the following markdown syntax "
    "![Alt text describing the contents of the figure](page_startx_starty_width_height.png)\n"
    "Return your output as markdown, with a front matter section on top specifying values for "
    "the primary_language, is_rotation_valid, rotation_correction, is_table, and is_diagram "
    "parameters."
)

#: Constrains the reply to the front-matter shape (vLLM ``structured_outputs.regex``).
GUIDED_REGEX = (
    r"---\nprimary_language: (?:[a-z]{2}|null)\n"
    r"is_rotation_valid: (?:True|False|true|false)\n"
    r"rotation_correction: (?:0|90|180|270)\n"
    r"is_table: (?:True|False|true|false)\n"
    r"is_diagram: (?:True|False|true|false)\n"
    r"(?:---|---\n[\s\S]+)"
)

TEMPERATURES = (0.1, 0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0)
SERVER_FLAGS = ("--max-model-len", "16384", "--limit-mm-per-prompt", '{"video": 0}')
#: The server preset (``ocrflow.engines.presets``) used when ocrflow starts vLLM on named
#: GPUs (``--gpus``) and no ``--preset`` is given. Measured on one H100
#: (docs/benchmarks.md): an fp8 KV cache holds 2.27 M tokens instead of 1.01 M and gave
#: +8 % pages/s; the FP8 checkpoint brings its own weight quantization.
GPU_PRESET = "fp8-kv"

_FRONT_MATTER = re.compile(r"\A\s*---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)(.*)\Z", re.S)
_FIGURE_LINK = re.compile(r"!\[([^\]\n]*)\]\(page_(\d+)_(\d+)_(\d+)_(\d+)\.png\)")
_BOOLEANS = {"true": True, "false": False}
_ROTATIONS = (0, 90, 180, 270)
_KEYS = ("primary_language", "is_rotation_valid", "rotation_correction", "is_table", "is_diagram")


@dataclass(frozen=True, slots=True)
class OlmocrRecipe(ChatRecipe):
    """olmOCR-2: text before image, 1288 px, strict front matter, rotation retries.

    ``guided`` constrains decoding to the front-matter shape with vLLM's
    ``structured_outputs`` (vLLM >= 0.12; the older ``guided_regex`` is ignored there).
    ``extract_figures`` turns ``![alt](page_x_y_w_h.png)`` links into figure crops when
    the pipeline recorded the image size in the reply (see ``layout.reply_image_size``).
    """

    #: The prompt comes before the image, as in olmOCR's training.
    image_first: ClassVar[bool] = False
    model: str = ""
    name: str = "olmocr"
    target_dim: int = 1288
    temperatures: tuple[float, ...] = TEMPERATURES
    max_tokens: int = 8000
    server_flags: tuple[str, ...] = SERVER_FLAGS
    gpu_preset: str = GPU_PRESET
    prompt: str = PROMPT
    guided: bool = False
    extract_figures: bool = True
    table_format: str = TABLES_HTML

    def __post_init__(self) -> None:
        check_table_format(self.table_format)

    def extra_body(self, attempt: int) -> dict[str, Any]:
        """The front-matter constraint when ``guided``."""
        return {"structured_outputs": {"regex": GUIDED_REGEX}} if self.guided else {}

    def parse(self, reply: EngineReply) -> ParsedPage:
        """Front matter into attributes and rotation; the body into Markdown."""
        require_stop(reply)
        front, body = split_front_matter(reply.text)
        attributes = parse_front_matter(front)
        body = normalize_whitespace(convert_tables(body, self.table_format))
        reject_loop(body)
        figures = FigureSet()
        if self.extract_figures:
            body = _extract_figures(body, reply, figures)
        attributes |= figures.attributes()
        return ParsedPage(
            body,
            _rotation(attributes),
            attributes,
            tuple(figures.figures),
            markdown_blocks(body, figures.figures),
        )


def split_front_matter(text: str) -> tuple[str, str]:
    """The front matter block and the body; ``ParseError`` when there is none."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        raise ParseError("reply has no --- front matter --- block", reason=MALFORMED)
    return match.group(1), match.group(2)


def parse_front_matter(block: str) -> dict[str, Any]:
    """The five olmOCR keys, typed; ``ParseError`` on a missing, extra or bad key."""
    values: dict[str, Any] = {}
    for line in block.splitlines():
        if not line.strip():
            continue
        key, sep, raw = line.partition(":")
        key = key.strip()
        if not sep or key not in _KEYS or key in values:
            raise ParseError(f"bad front matter line {line!r}", reason=MALFORMED)
        values[key] = _typed(key, raw.strip())
    missing = [key for key in _KEYS if key not in values]
    if missing:
        raise ParseError(f"front matter lacks {', '.join(missing)}", reason=MALFORMED)
    return {key: values[key] for key in _KEYS}


def _typed(key: str, raw: str) -> str | bool | int | None:
    """One front matter value as its type."""
    if key == "primary_language":
        value = raw.strip("'\"")
        return None if value.lower() in ("", "null", "none", "~") else value
    if key == "rotation_correction":
        if raw not in {str(r) for r in _ROTATIONS}:
            raise ParseError(f"rotation_correction {raw!r} not in {_ROTATIONS}", reason=MALFORMED)
        return int(raw)
    if raw.lower() not in _BOOLEANS:
        raise ParseError(f"{key} {raw!r} is not true or false", reason=MALFORMED)
    return _BOOLEANS[raw.lower()]


def _rotation(attributes: dict[str, Any]) -> int:
    """Degrees clockwise to turn the page, from the model's rotation verdict.

    olmOCR's ``rotation_correction`` is applied upstream as PIL ``Image.transpose``
    ``ROTATE_<n>``, which turns counter-clockwise (its training data pairs an image turned
    by ``ROTATE_90`` with ``rotation_correction: 270``), so clockwise it is ``360 - n``.
    """
    if attributes["is_rotation_valid"]:
        return 0
    return (360 - int(attributes["rotation_correction"])) % 360


def _extract_figures(body: str, reply: EngineReply, figures: FigureSet) -> str:
    """``![alt](page_x_y_w_h.png)`` links as figures; links stay when the size is unknown.

    Qwen2.5-VL answers in pixels of its resized image (``smart_resize``), so boxes are
    scaled against that size. A link whose box has no area is dropped.
    """
    size = reply_image_size(reply)
    if size is None:
        return body
    width, height = smart_resize(*size)

    def replace(match: re.Match[str]) -> str:
        x, y, w, h = (int(match.group(i)) for i in range(2, 6))
        box = scale_box((x, y, x + w, y + h), width, height)
        return figures.add(box, "figure", match.group(1)) if is_area(box) else ""

    return _FIGURE_LINK.sub(replace, body)
