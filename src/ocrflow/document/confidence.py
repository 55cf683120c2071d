"""Per-page confidence (0..1): one number per page from what its route knows.

A pure function of a page's route, status, attempt count, attributes and block scores, so
the same page gets the same number wherever it is read (a live result, a done marker, a
JSONL record). The number ranks pages for review; it is not a calibrated probability.

Formula (``page_score``), by route:

* **failed** (``status == failed``: no text where text was wanted): ``0``.
  **skipped** and **blank** pages: ``None`` (nothing was read, nothing to doubt).
* **text layer**: the layer's quality score ``attributes["text_layer_score"]`` (already
  0..1; accepted born-digital pages score >= 0.877, the floor of acceptance is 0.70);
  ``None`` when no score was computed.
* **engine, scored** (embedded recogniser, Tesseract): ``attributes["mean_confidence"]``,
  else the blocks' confidences weighted by their text length (as before this module).
* **engine, VLM** (a page whose attributes hold what a VLM reader records:
  ``temperature``, ``finish_reason``, ``retry_reasons``, ``mean_token_prob``), or any
  engine page read in more than one attempt::

      base    = mean_token_prob            (exp of the mean token logprob, --logprobs)
                else the engine score above, else VLM_PRIOR (0.90)
      retries = prod(RETRY_FACTOR[r] for r in retry_reasons)
                (truncated 0.70, repetition 0.70, parse_error/garbage 0.75,
                 empty_reply 0.85, rotation 0.95, anything else 0.80);
                without ``retry_reasons`` (older records): 0.80 ** (attempts - 1)
      climb   = 1 - 0.30 * max(0, temperature_climb)   (accepted attempt's temperature
                above the ladder's first step)
      cut     = 0.50 if finish_reason == "length" else 1 (a reply that did not end)
      shrink  = 0.90 ** shrinks             (the image or token budget was cut to fit)
      score   = base * retries * climb * cut * shrink

  A VLM page that answered at once, at the first temperature, with ``stop`` and without
  logprobs scores 0.90: "no complaint", not "verified".
* **fallback** (the VLM gave up; text from the text layer or a CPU engine)::

      score = FALLBACK_FACTOR (0.50) * (text_layer_score, else the engine score,
                                        else FALLBACK_PRIOR 0.60)

  so every fallback page scores 0.5 or less and is reviewed before any read page.

Scores are clamped to 0..1 and rounded to 4 places.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: Score of a VLM page with nothing against it and no token logprobs.
VLM_PRIOR = 0.90
#: What one failed attempt before the accepted one costs, by its ``ParseError`` reason.
RETRY_FACTOR: Mapping[str, float] = {
    "truncated": 0.70,  # finish_reason length: usually a repetition loop the budget cut
    "repetition": 0.70,
    "parse_error": 0.75,  # garbage: the reply did not follow the model's format
    "empty_reply": 0.85,
    "rotation": 0.95,  # the model asked for the page turned: a retry, not a fault
}
#: What a failed attempt of unknown reason costs (and each extra attempt of older records).
OTHER_RETRY_FACTOR = 0.80
#: Each 1.0 of temperature climbed above the ladder's first step costs this share.
CLIMB_WEIGHT = 0.30
#: An accepted reply that stopped at ``max_tokens`` keeps this share.
LENGTH_FACTOR = 0.50
#: Each shrink of the image or token budget keeps this share.
SHRINK_FACTOR = 0.90
#: A fallback page keeps this share of its source's score ...
FALLBACK_FACTOR = 0.50
#: ... or of this, when its source gave none.
FALLBACK_PRIOR = 0.60

#: Attributes only a VLM reader records.
_VLM_KEYS = ("temperature", "finish_reason", "retry_reasons", "mean_token_prob")

#: ``(share, lower bound)`` buckets of ``spread``: < 0.5, 0.5-0.8, 0.8-0.95, >= 0.95.
BUCKETS: tuple[tuple[str, float], ...] = (
    ("<0.5", 0.0),
    ("0.5-0.8", 0.5),
    ("0.8-0.95", 0.8),
    (">=0.95", 0.95),
)


def page_score(
    route: str,
    status: str,
    attributes: Mapping[str, Any],
    *,
    attempts: int = 0,
    blocks: Iterable[tuple[float | None, int]] = (),
) -> float | None:
    """The page's confidence (0..1), or ``None`` when nothing was read to doubt.

    ``blocks`` are ``(confidence, text length)`` of the page's blocks. See the module
    docstring for the formula.
    """
    if status == "skipped" or route == "blank":
        return None
    if status == "failed":
        return 0.0
    engine = engine_score(attributes, blocks)
    layer = _number(attributes.get("text_layer_score"))
    if route == "text_layer":
        return _unit(layer)
    if route == "fallback":
        source = next((s for s in (layer, engine) if s is not None), FALLBACK_PRIOR)
        return _unit(FALLBACK_FACTOR * source)
    if route != "engine":
        return None
    if attempts > 1 or any(key in attributes for key in _VLM_KEYS):
        return _unit(vlm_score(attributes, attempts=attempts, engine=engine))
    return _unit(engine)


def engine_score(
    attributes: Mapping[str, Any], blocks: Iterable[tuple[float | None, int]] = ()
) -> float | None:
    """The engine's own mean confidence, else its blocks' weighted by text length."""
    mean = _number(attributes.get("mean_confidence"))
    if mean is not None:
        return mean
    scored = [(c, n or 1) for c, n in blocks if c is not None]
    if not scored:
        return None
    return sum(c * n for c, n in scored) / sum(n for _, n in scored)


def vlm_score(
    attributes: Mapping[str, Any], *, attempts: int = 1, engine: float | None = None
) -> float:
    """``base * retries * climb * cut * shrink`` (module docstring), unclamped."""
    token_prob = _number(attributes.get("mean_token_prob"))
    base = next((s for s in (token_prob, engine) if s is not None), VLM_PRIOR)
    reasons = attributes.get("retry_reasons")
    if isinstance(reasons, list | tuple):
        retries = math.prod(RETRY_FACTOR.get(str(r), OTHER_RETRY_FACTOR) for r in reasons)
    else:
        retries = OTHER_RETRY_FACTOR ** max(0, attempts - 1)
    climb = 1.0 - CLIMB_WEIGHT * max(0.0, _number(attributes.get("temperature_climb")) or 0.0)
    cut = LENGTH_FACTOR if attributes.get("finish_reason") == "length" else 1.0
    shrink = SHRINK_FACTOR ** int(_number(attributes.get("shrinks")) or 0)
    return base * retries * climb * cut * shrink


def mean_token_prob(logprobs: Sequence[object]) -> float | None:
    """The geometric mean of the tokens' probabilities, ``exp(mean(logprob))``; ``None``
    for no tokens. A logprob of ``-inf`` (vLLM's ``-9999.0`` too) pulls it to ~0. Values
    that are not numbers (a server's JSON may hold ``null``) are left out."""
    values = [float(v) for v in logprobs if isinstance(v, int | float)]
    if not values:
        return None
    return round(math.exp(max(-50.0, sum(values) / len(values))), 4)


def spread(confidences: Iterable[float | None]) -> dict[str, int]:
    """How many pages fall in each of ``BUCKETS``, plus ``unknown`` (``None``)."""
    counts = {name: 0 for name, _ in BUCKETS} | {"unknown": 0}
    for value in confidences:
        if value is None:
            counts["unknown"] += 1
            continue
        counts[bucket(value)] += 1
    return counts


def bucket(value: float) -> str:
    """The name of the ``BUCKETS`` entry ``value`` falls in."""
    return next((name for name, low in reversed(BUCKETS) if value >= low), BUCKETS[0][0])


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _unit(value: float | None) -> float | None:
    return None if value is None else round(min(1.0, max(0.0, value)), 4)
