"""Reply texts of the fake server: deterministic, cheap, and traceable to their image.

Every normal reply names the page it answers as ``page-<first 12 hex of the SHA-1 of the
image's base64 payload>`` (the characters after ``base64,``, hashed as ASCII bytes, never
decoded) and ends with ``(temperature T)``, so a test can check which image a reply
belongs to and which retry temperature produced it. The body is filler text of about
four characters per output token.
"""

from __future__ import annotations

import base64
import hashlib
import random

from tests.fakevllm.formats_new import NEW_FORMATS, new_format_text
from tests.fakevllm.formats_steps import (
    STEP_FORMATS,
    is_layout_prompt,
    layout_text,
    step_format_text,
)

REPLY_FORMATS = ("markdown", "olmocr", "deepseek", *NEW_FORMATS, *STEP_FORMATS)
#: Text that marks a request as a figure request (ocrflow's describe prompts hold it).
FIGURE_MARKER = "figure cropped from a document"

OLMOCR_FRONT_MATTER = (
    "---\nprimary_language: en\nis_rotation_valid: true\nrotation_correction: 0\n"
    "is_table: false\nis_diagram: false\n---\n"
)

_LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
    "incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud "
    "exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure "
    "dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur. "
)

CHARS_PER_TOKEN = 4


def page_tag(b64_payload: str) -> str:
    """``page-`` plus the first 12 hex digits of SHA-1 over the base64 payload text."""
    return "page-" + hashlib.sha1(b64_payload.encode("ascii", "replace")).hexdigest()[:12]


def filler(n_chars: int) -> str:
    """About ``n_chars`` characters of lorem ipsum (at least a few words)."""
    n_chars = max(n_chars, 24)
    reps = n_chars // len(_LOREM) + 1
    return (_LOREM * reps)[:n_chars].rstrip()


def _temperature_text(temperature: object) -> str:
    """How the request's temperature is written into the reply."""
    return "default" if temperature is None else str(temperature)


def _deepseek_box(tag: str, salt: int) -> str:
    """A deterministic box on DeepSeek-OCR's 0-999 grid derived from the page tag."""
    seed = int(tag[-6:], 16) if len(tag) > 6 else 0
    x1 = (seed + 37 * salt) % 400
    y1 = (seed // 7 + 211 * salt) % 500
    return f"[[{x1}, {y1}, {x1 + 500}, {y1 + 300}]]"


def normal_text(
    fmt: str, tags: list[str], temperature: object, tokens: int, figures: int = 1
) -> str:
    """The full, well-formed reply of ``fmt`` for a page of ``tokens`` output tokens;
    a ``deepseek`` reply ends with ``figures`` image regions."""
    heading = "# Page " + " ".join(tags or ["page-none"])
    tail = f" (temperature {_temperature_text(temperature)})"
    body = filler(tokens * CHARS_PER_TOKEN - len(heading) - len(tail))
    if fmt in STEP_FORMATS:
        return step_format_text(fmt, tags, heading, body, tail)
    if fmt in NEW_FORMATS:
        return new_format_text(fmt, heading, body, tail)
    if fmt == "olmocr":
        return f"{OLMOCR_FRONT_MATTER}{heading}\n\n{body}{tail}"
    if fmt == "deepseek":
        first = tags[0] if tags else "page-none"
        return (
            f"<|ref|>title<|/ref|><|det|>{_deepseek_box(first, 0)}<|/det|>\n{heading}\n\n"
            f"<|ref|>text<|/ref|><|det|>{_deepseek_box(first, 1)}<|/det|>\n{body}{tail}\n\n"
            + "".join(
                f"<|ref|>image<|/ref|><|det|>{_deepseek_box(first, 2 + i)}<|/det|>\n"
                for i in range(figures)
            )
        )
    return f"{heading}\n\n{body}{tail}"


def cut_text(text: str, tokens: int) -> str:
    """``text`` cut to about ``tokens`` output tokens (mid-word, like a length stop)."""
    return text[: max(1, tokens * CHARS_PER_TOKEN)]


def length_fault_text(fmt: str, tags: list[str], tokens: int) -> str:
    """A degenerate repetition loop cut off mid-word (for injected ``length`` stops)."""
    heading = "# Page " + " ".join(tags or ["page-none"])
    prefix = OLMOCR_FRONT_MATTER if fmt == "olmocr" else ""
    loop = "the table of the " * (tokens // 4 + 2)
    return cut_text(f"{prefix}{heading}\n\n{loop}", tokens)


def garbage_text(rng: random.Random, tokens: int) -> str:
    """Unparsable content with ``finish_reason`` stop: noise or a repetition loop."""
    n_chars = max(16, tokens * CHARS_PER_TOKEN)
    if rng.random() < 0.5:
        return ("the " * (n_chars // 4 + 1))[:n_chars]
    alphabet = "\u00e2\u0080\u0099\ufffd#$%&*<>{}|~^`0123456789abcdefXYZ \t"
    return "".join(rng.choices(alphabet, k=n_chars))


def token_logprobs(content: str, fault: str | None, temperature: object) -> dict[str, object]:
    """A choice's ``logprobs`` as vLLM returns them for ``"logprobs": true``: one entry a
    token (``CHARS_PER_TOKEN`` characters) with its text, logprob, UTF-8 bytes and no top
    alternatives. A normal answer is sure of itself (mean logprob about -0.02, less sure
    as the temperature rises); an injected ``length`` or ``garbage`` answer is not (-0.9).
    Deterministic: each value follows from the token's text."""
    heat = temperature if isinstance(temperature, int | float) else 0.0
    centre = -0.9 if fault in ("length", "garbage") else -0.02 - 0.1 * heat
    entries = []
    for start in range(0, len(content), CHARS_PER_TOKEN):
        token = content[start : start + CHARS_PER_TOKEN]
        jitter = int(hashlib.sha1(token.encode()).hexdigest()[:4], 16) / 0xFFFF  # 0..1
        entries.append(
            {
                "token": token,
                "logprob": round(centre * (0.5 + jitter), 6),
                "bytes": list(token.encode()),
                "top_logprobs": [],
            }
        )
    return {"content": entries}


def figure_text(tags: list[str], prompt: str, temperature: object) -> str:
    """The answer to a figure request, naming the figure's image tag: a class for a prompt
    that says ``classify``, a Markdown table for one that says ``table``, else a caption."""
    if is_layout_prompt(prompt):  # MinerU's layout step (``formats_steps``)
        return layout_text(tags)
    tag = tags[0] if tags else "page-none"
    lowered = prompt.lower()
    if "classify" in lowered:
        return "chart"
    if "table" in lowered:
        return f"| figure | value |\n|---|---|\n| {tag} | 42 |"
    heat = _temperature_text(temperature)
    return f"Figure {tag}: a bar chart of quarterly values (temperature {heat})."


#: The DeepSeek-OCR clean prompt: with ``--second-pass-replies`` it gets ``region_text``.
FREE_OCR_PROMPT = "Free OCR."
#: With ``--second-pass-replies``, a grounding reply to an image this long (the 1280 px
#: large mode) has a ``table`` region.
LARGE_MODE_SIDE = 1280


def region_text(tags: list[str]) -> str:
    """The answer to a region read again with the clean prompt (names the crop's tag)."""
    return f"Region {tags[0] if tags else 'page-none'} read again."


def table_region(tags: list[str]) -> str:
    """A grounded ``table`` region, as a large-mode read of a ruled page gives it."""
    tag = tags[0] if tags else "page-none"
    return (
        "<|ref|>table<|/ref|><|det|>[[80, 620, 920, 900]]<|/det|>\n"
        f"<table><tr><td>item</td><td>{tag}</td></tr><tr><td>total</td><td>42</td></tr></table>"
    )


def png_size(b64_payload: str) -> tuple[int, int] | None:
    """Width and height of a base64 PNG, from its header alone (None if not a PNG)."""
    head = base64.b64decode(b64_payload[:44] + "=" * (-len(b64_payload[:44]) % 4))
    if len(head) < 24 or not head.startswith(b"\x89PNG"):
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
