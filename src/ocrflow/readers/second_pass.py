"""Region second passes for DeepSeek-OCR grounding replies (from the DeepSeek-OCR runner's
notes): read chosen regions again, and pages that miss a table again in the large mode.

- **ROI re-inference** (``roi_labels``): each grounded region with one of the labels is
  cropped from the page at ``HIRES_DIM`` px (the first read saw 640 px) and read again with
  the clean prompt (``Free OCR.``). The second read replaces the region's text when it
  passes its checks: the reply ended on its own and holds no repetition loop, is not empty,
  and its visible length is within ``MIN_RATIO``..``MAX_RATIO`` of the first read's
  (``LENGTH_SLACK`` characters of leeway for short regions such as titles).
- **Large-mode retry** (``retry_large_cap``): a page whose reply lacks a required label
  (``table``) although the page looks like it has one (ruling lines, ``render.rulings``) is
  read again at 1280 px, at most ``retry_large_cap`` pages per reader (per worker); the new
  read is kept when it has the label.

Both are recorded in the page's ``attributes["second_pass"]``: what was read again,
accepted or not, and why. A failed second read never fails the page: the first read stays.

They are the steps of a page (``readers/steps.py``): with a step checkpoint, the page's
first read is kept once it parsed and each second read (``large``, ``roi<i>``) as it
comes, so a run stopped midway does not ask them again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from ocrflow.errors import ConfigError, EngineFailing, OcrflowError
from ocrflow.readers.steps import PageSteps
from ocrflow.recipes.base import ParsedPage, StepAnswer
from ocrflow.recipes.deepseek import GRID, MODE_SIZES, DeepseekRecipe, split_regions
from ocrflow.recipes.text import detect_repetition
from ocrflow.render.jobs import decode_image, encode_image
from ocrflow.render.rulings import find_rulings
from ocrflow.types import EngineReply, PageImage, PageKey, PageRequest

HIRES_DIM = MODE_SIZES["large"]
MIN_RATIO, MAX_RATIO, LENGTH_SLACK = 0.5, 2.0, 20
#: Share of the page added around a region's box before it is cropped.
ROI_PAD = 0.01
#: Names users may give for a grounding label.
LABEL_ALIASES = {"figure": "image", "subtitle": "sub_title"}

Ask = Callable[[PageRequest], Awaitable[EngineReply]]
#: The page key of second passes run without a step checkpoint.
_NO_KEY = PageKey("", 0)
Region = tuple[str, str, str]

_BOX = re.compile(r"\[\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,"
                  r"\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\]")  # fmt: skip
_TAGS = re.compile(r"<[^>]*>")


@dataclass
class SecondPass:
    """The second passes of one reader. ``retries_used`` counts large-mode retries (it is
    the only state, owned by one reader in one event loop)."""

    recipe: DeepseekRecipe
    roi_labels: frozenset[str] = frozenset()
    retry_large_cap: int = 0
    required_labels: tuple[str, ...] = ("table",)
    retries_used: int = field(default=0)

    async def refine(
        self,
        hires: PageImage,
        reply: EngineReply,
        parsed: ParsedPage,
        ask: Ask,
        steps: PageSteps | None = None,
    ) -> ParsedPage:
        """``parsed`` improved by the second passes, with their record in its attributes.

        With ``steps`` (the page's step checkpoint) each further read is checkpointed as
        it comes (``large``, ``roi<i>``), and one a stopped run already made is not asked
        again."""
        steps = steps or PageSteps(None, _NO_KEY, None)
        record: dict[str, Any] = {}
        try:
            if self.retry_large_cap:
                retried = await self._large_retry(hires, reply, ask, record, steps)
                if retried is not None:
                    reply, parsed = retried
            if self.roi_labels:
                parsed = await self._roi(hires, reply, parsed, ask, record, steps)
        finally:
            await steps.drain()  # cancelled too: the saves in flight land first (run_steps)
        if not record:
            return parsed
        return dataclasses.replace(parsed, attributes={**parsed.attributes, "second_pass": record})

    # -- large-mode retry ----------------------------------------------------------------
    async def _large_retry(
        self,
        hires: PageImage,
        reply: EngineReply,
        ask: Ask,
        record: dict[str, Any],
        steps: PageSteps,
    ) -> tuple[EngineReply, ParsedPage] | None:
        labels = {label for label, _, _ in split_regions(reply.text)}
        missing = [label for label in self.required_labels if label not in labels]
        if not missing:
            return None
        picture = await asyncio.to_thread(decode_image, hires)
        if not (await asyncio.to_thread(find_rulings, picture)).table_like:
            return None
        entry: dict[str, Any] = {"missing": missing, "dim": HIRES_DIM, "accepted": False}
        record["large_retry"] = entry
        saved = steps.answers.get("large")
        if saved is None and self.retries_used >= self.retry_large_cap:
            entry["reason"] = f"cap of {self.retry_large_cap} pages reached"
            return None
        try:
            if saved is None:
                self.retries_used += 1
                large = await asyncio.to_thread(_fit, picture, HIRES_DIM, hires.encoding)
                new_reply = await _asked(ask, self.recipe.build_request(large, 0), "large", steps)
            elif saved.text is None:
                raise OcrflowError(saved.reason)
            else:
                new_reply = EngineReply(saved.text, attributes={"resumed": True})
            new_parsed = self.recipe.parse(new_reply)
        except EngineFailing:
            raise
        except OcrflowError as exc:
            entry["reason"] = f"second read failed: {exc}"
            return None
        new_labels = {label for label, _, _ in split_regions(new_reply.text)}
        still = [label for label in missing if label not in new_labels]
        if still:
            entry["reason"] = f"the large read has no {', '.join(still)} either"
            return None
        entry |= {"accepted": True, "reason": f"the large read has {', '.join(missing)}"}
        return new_reply, new_parsed

    # -- ROI re-inference ----------------------------------------------------------------
    async def _roi(
        self,
        hires: PageImage,
        reply: EngineReply,
        parsed: ParsedPage,
        ask: Ask,
        record: dict[str, Any],
        steps: PageSteps,
    ) -> ParsedPage:
        regions = split_regions(reply.text)
        chosen = [i for i, r in enumerate(regions) if r[0] in self.roi_labels and _box(r[1])]
        if not chosen:
            return parsed
        picture = await asyncio.to_thread(decode_image, hires)
        reads = await asyncio.gather(
            *(
                self._read_region(picture, hires.encoding, regions[i], ask, (f"roi{i}", steps))
                for i in chosen
            )
        )
        entries, texts = [], list(regions)
        for i, (entry, text) in zip(chosen, reads, strict=True):
            entries.append(entry)
            if text is not None:
                texts[i] = (regions[i][0], regions[i][1], text)
        record["roi"] = entries
        if all(text is None for _, text in reads):
            return parsed
        try:
            return self.recipe.parse(dataclasses.replace(reply, text=rebuild_reply(texts)))
        except OcrflowError as exc:
            record["roi_error"] = f"the page with re-read regions did not parse: {exc}"
            return parsed

    async def _read_region(
        self,
        picture: Image.Image,
        encoding: str,
        region: Region,
        ask: Ask,
        step: tuple[str, PageSteps],
    ) -> tuple[dict[str, Any], str | None]:
        """One region read again: its record, and its new text when accepted."""
        label, box_text, old = region
        entry: dict[str, Any] = {"label": label, "box": box_text.strip(), "accepted": False}
        box = _box(box_text)
        assert box is not None
        key, steps = step
        saved = steps.answers.get(key)
        free = dataclasses.replace(self.recipe, mode="free")
        try:
            if saved is None:
                crop = await asyncio.to_thread(_crop, picture, box, encoding)
                reply = await _asked(ask, free.build_request(crop, 0), key, steps)
            elif saved.text is None:
                raise OcrflowError(saved.reason)
            else:
                reply = EngineReply(saved.text, attributes={"resumed": True})
            text = free.parse(reply).markdown
        except EngineFailing:
            raise
        except OcrflowError as exc:
            entry["reason"] = f"second read failed: {exc}"
            return entry, None
        verdict = check_region_text(old, text)
        entry["chars"] = [len(_visible(old)), len(_visible(text))]
        entry["reason"] = verdict or "passed its checks"
        if verdict:
            return entry, None
        entry["accepted"] = True
        return entry, text


async def _asked(ask: Ask, request: PageRequest, key: str, steps: PageSteps) -> EngineReply:
    """``ask``, its reply's text (or its failure) checkpointed under ``key``."""
    try:
        reply = await ask(request)
    except EngineFailing:
        raise
    except OcrflowError as exc:
        steps.record_answer(StepAnswer(key, None, str(exc)))
        raise
    # A reply that did not end on its own fails its parse now and after a resume alike.
    stopped = reply.finish_reason == "stop"
    reason = "" if stopped else f"finish_reason {reply.finish_reason}"
    steps.record_answer(StepAnswer(key, reply.text if stopped else None, reason))
    return reply


def second_pass_for(
    recipe: object,
    roi_labels: tuple[str, ...],
    retry_large_cap: int,
    required_labels: tuple[str, ...] = ("table",),
) -> SecondPass | None:
    """The second passes the options ask for, or None; ``ConfigError`` when the recipe is
    not DeepSeek-OCR in grounding mode (only its replies carry regions)."""
    if not roi_labels and not retry_large_cap:
        return None
    if not isinstance(recipe, DeepseekRecipe) or recipe.mode != "grounding":
        raise ConfigError("--roi-labels/--retry-large-cap need the deepseek recipe (grounding)")
    labels = frozenset(LABEL_ALIASES.get(label, label) for label in roi_labels)
    return SecondPass(recipe, labels, retry_large_cap, required_labels)


def check_region_text(old: str, new: str) -> str | None:
    """Why a second read of a region is refused (None: it passes)."""
    if not _visible(new):
        return "empty"
    if detect_repetition(new):
        return "repetition loop"
    before, after = len(_visible(old)), len(_visible(new))
    if before and not (MIN_RATIO * before - LENGTH_SLACK <= after <= MAX_RATIO * before
                       + LENGTH_SLACK):  # fmt: skip
        return f"length ratio {after / before:.2f} outside {MIN_RATIO}-{MAX_RATIO}"
    return None


def rebuild_reply(regions: list[Region]) -> str:
    """A grounding reply from ``split_regions`` output (text before any region stays bare)."""
    parts = []
    for index, (label, box, text) in enumerate(regions):
        if index == 0 and not box:
            parts.append(text)
        else:
            parts.append(f"<|ref|>{label}<|/ref|><|det|>{box}<|/det|>\n{text}")
    return "\n\n".join(parts)


def _box(box_text: str) -> tuple[float, float, float, float] | None:
    """The first box of a region, as fractions of the page; None when there is none."""
    match = _BOX.search(box_text)
    if not match:
        return None
    x0, y0, x1, y1 = (min(1.0, max(0.0, float(v) / GRID)) for v in match.groups())
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


def _crop(picture: Image.Image, box: tuple[float, float, float, float], encoding: str) -> PageImage:
    x0, y0, x1, y1 = box
    width, height = picture.size
    left, top = max(0.0, x0 - ROI_PAD) * width, max(0.0, y0 - ROI_PAD) * height
    right, bottom = min(1.0, x1 + ROI_PAD) * width, min(1.0, y1 + ROI_PAD) * height
    region = picture.crop((int(left), int(top), max(int(right), int(left) + 1),
                           max(int(bottom), int(top) + 1)))  # fmt: skip
    return encode_image(region, encoding)


def _fit(picture: Image.Image, longest: int, encoding: str) -> PageImage:
    scale = longest / max(picture.size)
    size = (max(1, round(picture.width * scale)), max(1, round(picture.height * scale)))
    resized = picture if size == picture.size else picture.resize(size, Image.Resampling.LANCZOS)
    return encode_image(resized, encoding)


def _visible(text: str) -> str:
    return " ".join(_TAGS.sub(" ", text).split())
