"""Does page confidence rank pages by their errors? And what do token logprobs cost?

Run: ``.venv/bin/python bench/bench_confidence.py [--dim 1288] [--only NAME]
[--logprobs-cost 200] [--skip-engines]``

1. **Confidence against CER.** Every ground-truth page of ``bench_quality.py`` (the corpus
   scans, rendered as the product renders them) is read by the embedded engine and by
   Tesseract through their ``infer`` (what a run calls); each reply becomes the page
   result a run records, and ``ocrflow.document.page_confidence`` scores it. Per engine it
   prints Spearman's rho between confidence and CER (``ocrflow.evaluation.metrics``), over
   all pages and without the Fraktur ones (which neither engine reads). A useful
   confidence has a clearly negative rho: the less sure, the more errors. Rho is computed
   here (ranks with ties averaged, then Pearson on the ranks): scipy is not a dependency.
2. **What ``--logprobs`` costs** (``--logprobs-cost N``): N page requests to the fake vLLM
   server (``tests/fakevllm``, vLLM's reply shape: one ``{token, logprob, bytes,
   top_logprobs}`` object a token), with and without ``"logprobs": true``, alternately.
   Prints the reply bytes a page and the client's seconds a page to decode the reply
   (``json`` + ``completions.parse_reply``), each the median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
from bench_quality import CORPUS, FRAKTUR, Sample, _samples, render

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ocrflow.document import page_confidence  # noqa: E402
from ocrflow.engines.completions import parse_reply, request_body, v1  # noqa: E402
from ocrflow.engines.embedded import EmbeddedEngine  # noqa: E402
from ocrflow.engines.tesseract import TesseractEngine  # noqa: E402
from ocrflow.evaluation.metrics import score_text  # noqa: E402
from ocrflow.render.jobs import encode_image  # noqa: E402
from ocrflow.types import PageRequest, PageResult, Route  # noqa: E402
from tests.fakevllm.process import running_server  # noqa: E402

ENGINES = ("embedded", "tesseract")


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks of ``values``, ties sharing the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            result[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return result


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho: Pearson's correlation of the ranks (``nan`` under 3 pairs or a
    constant side)."""
    if len(x) != len(y) or len(x) < 3:
        return math.nan
    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return sxy / (sx * sy) if sx and sy else math.nan


async def _read(engines: dict[str, object], sample: Sample, dim: int) -> dict[str, PageResult]:
    """Each engine's page result for ``sample``, as a run records it."""
    picture = render(sample, dim)
    results = {}
    for name, engine in engines.items():
        image = encode_image(picture, engine.image_encoding)  # type: ignore[attr-defined]
        reply = await engine.infer(PageRequest(image=image))  # type: ignore[attr-defined]
        attributes = {"rotation": reply.rotation, "engine": reply.engine, **reply.attributes}
        results[name] = PageResult(
            sample.page, reply.text, Route.ENGINE, attempts=1, attributes=attributes,
            blocks=reply.blocks,
        )  # fmt: skip
    return results


def confidence_against_cer(dim: int, only: str | None) -> None:
    """Part 1 of the module docstring."""
    engines: dict[str, object] = {"embedded": EmbeddedEngine(), "tesseract": TesseractEngine()}
    rows: list[tuple[Sample, dict[str, tuple[float | None, float]]]] = []
    for sample in _samples():
        if sample.truth is None or (only and only not in sample.name):
            continue
        truth = sample.truth()
        pages = asyncio.run(_read(engines, sample, dim))
        scored = {
            name: (page_confidence(page), score_text(truth, page.text).cer)
            for name, page in pages.items()
        }
        rows.append((sample, scored))
        cells = "  ".join(
            f"{name[:4]} conf {_fmt(c)} cer {cer:6.3f}" for name, (c, cer) in scored.items()
        )
        mark = "*" if FRAKTUR in sample.tags else " "
        print(f"{mark}{sample.name[:44]:<44} {cells}", flush=True)
    print(f"\nSpearman's rho, confidence vs CER (dim {dim}; negative = confidence tracks errors):")
    for name in ENGINES:
        for label, keep in (("all pages", lambda s: True), ("no Fraktur", _not_fraktur)):
            pairs = [
                (c, cer)
                for sample, scored in rows
                if keep(sample)
                for c, cer in [scored[name]]
                if c is not None and not math.isnan(cer)
            ]
            rho = spearman([p[0] for p in pairs], [p[1] for p in pairs])
            print(f"  {name:<10} {label:<11} rho = {rho:+.3f}  (n = {len(pairs)})")


def _not_fraktur(sample: Sample) -> bool:
    return FRAKTUR not in sample.tags


def _fmt(value: float | None) -> str:
    return "  none" if value is None else f"{value:6.3f}"


def logprobs_cost(n: int) -> None:
    """Part 2 of the module docstring."""
    from PIL import Image

    image = encode_image(Image.new("RGB", (256, 256), "white"), "png")
    flags = ("--reply-format", "olmocr", "--model", "olmocr", "--pages-per-s", "1000",
             "--tokens-per-page", "1000")  # fmt: skip
    sizes: dict[bool, list[int]] = {False: [], True: []}
    decode: dict[bool, list[float]] = {False: [], True: []}
    walls: dict[bool, list[float]] = {False: [], True: []}
    with running_server(*flags) as server, httpx.Client(timeout=30) as client:
        url = f"{v1(server.base_url)}/chat/completions"
        for i in range(2 * n):
            wanted = bool(i % 2)
            request = PageRequest(image=image, prompt=f"page {i // 2}", temperature=0.1)
            body = request_body(request, "olmocr", logprobs=wanted)
            started = time.perf_counter()
            answer = client.post(url, content=body, headers={"Content-Type": "application/json"})
            wall = time.perf_counter() - started
            answer.raise_for_status()
            started = time.perf_counter()
            reply = parse_reply(json.loads(answer.content), wall, "openai", url)
            decode[wanted].append(time.perf_counter() - started)
            sizes[wanted].append(len(answer.content))
            walls[wanted].append(wall)
            assert ("mean_token_prob" in reply.attributes) == wanted
    tokens = reply.tokens_out
    print(f"\n--logprobs on the fake server ({n} pages each, {tokens} output tokens a page):")
    for wanted in (False, True):
        size = statistics.median(sizes[wanted])
        print(
            f"  logprobs {'on ' if wanted else 'off'}: reply {size:>9,.0f} B"
            f"  decode {statistics.median(decode[wanted]) * 1000:7.3f} ms"
            f"  round trip {statistics.median(walls[wanted]) * 1000:7.2f} ms"
        )
    grow = statistics.median(sizes[True]) / statistics.median(sizes[False])
    print(
        f"  reply size x{grow:.1f}; {statistics.median(sizes[True]) / max(tokens, 1):.0f} B a token"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=1288, help="longest side in px")
    parser.add_argument("--only", help="only pages whose name contains this")
    parser.add_argument("--logprobs-cost", type=int, default=100, help="pages (0: skip)")
    parser.add_argument("--skip-engines", action="store_true", help="only the logprobs cost")
    args = parser.parse_args(argv)
    if not args.skip_engines:
        if not CORPUS.is_dir():
            print(f"corpus not found at {CORPUS.resolve()}", file=sys.stderr)
            return 2
        confidence_against_cer(args.dim, args.only)
    if args.logprobs_cost:
        logprobs_cost(args.logprobs_cost)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
