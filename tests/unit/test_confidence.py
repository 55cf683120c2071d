"""Per-page confidence: the pure scoring of ``document.confidence``, the logprobs on the
wire (``engines.completions``), and the page it lands on (``document.page_confidence``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pytest

from ocrflow.document import page_confidence
from ocrflow.document.confidence import (
    FALLBACK_FACTOR,
    VLM_PRIOR,
    bucket,
    mean_token_prob,
    page_score,
    spread,
)
from ocrflow.engines.completions import parse_reply, request_body, token_probability
from ocrflow.errors import ConfigError
from ocrflow.observe.confidence_spread import confidence_spread, scored_pages
from ocrflow.review.select import (
    confidence_bar,
    low_confidence_filter,
    parse_only,
    select_records,
)
from ocrflow.sinks.base import DocumentMeta, FinishedDocument
from ocrflow.sinks.parquet import (
    DOCUMENT_SCHEMA,
    PAGE_TYPE,
    ParquetSink,
    document_row,
    finalize_shards,
    read_documents,
)
from ocrflow.storage.local import LocalStore
from ocrflow.storage.shards import table_bytes
from ocrflow.types import (
    Block,
    BlockLabel,
    DocStatus,
    DocumentResult,
    PageImage,
    PageRequest,
    PageResult,
    PageStatus,
    Route,
)
from ocrflow.workspace.records import DoneRecord, PageSummary
from ocrflow.workspace.state import page_to_dict


def vlm(**attributes: object) -> float | None:
    base = {"finish_reason": "stop", "temperature": 0.0, "retry_reasons": []}
    return page_score("engine", "ok", {**base, **attributes}, attempts=1)


def test_engine_scores_are_kept_as_the_engine_gives_them() -> None:
    assert page_score("engine", "ok", {"mean_confidence": 0.873}) == 0.873
    # Tesseract: no page mean, blocks weighted by their text length.
    blocks = [(0.9, 300), (0.3, 100), (None, 50)]
    assert page_score("engine", "ok", {}, blocks=blocks) == pytest.approx(0.75)
    assert page_score("engine", "ok", {}) is None


def test_text_layer_pages_score_their_layer_quality() -> None:
    assert page_score("text_layer", "ok", {"text_layer_score": 0.934}) == 0.934
    assert page_score("text_layer", "ok", {"text_layer_score": 1.7}) == 1.0
    assert page_score("text_layer", "ok", {}) is None


def test_blank_skipped_and_failed_pages() -> None:
    assert page_score("blank", "ok", {"text_layer_score": 0.9}) is None
    assert page_score("engine", "skipped", {}) is None
    assert page_score("none", "failed", {}) == 0.0
    assert page_score("fallback", "failed", {"retry_reasons": ["truncated"]}) == 0.0


def test_a_clean_vlm_page_scores_the_prior_and_each_fault_lowers_it() -> None:
    clean = vlm()
    assert clean == VLM_PRIOR
    retried = vlm(retry_reasons=["parse_error"], temperature=0.1, temperature_climb=0.1)
    twice = vlm(retry_reasons=["truncated", "repetition"], temperature_climb=0.2)
    cut = vlm(finish_reason="length")
    shrunk = vlm(shrinks=1)
    assert clean > shrunk > retried > twice
    assert cut == pytest.approx(VLM_PRIOR * 0.5)
    # One garbage retry at a 0.1 climb: 0.9 * 0.75 * (1 - 0.03).
    assert retried == pytest.approx(0.9 * 0.75 * 0.97, abs=1e-4)
    # A rotation retry is a retry, not a fault: it costs little.
    assert vlm(retry_reasons=["rotation"]) == pytest.approx(0.9 * 0.95)


def test_older_vlm_records_without_reasons_pay_per_attempt() -> None:
    assert page_score("engine", "ok", {}, attempts=3) == pytest.approx(0.9 * 0.8**2)
    assert page_score("engine", "ok", {"mean_confidence": 0.5}, attempts=2) == 0.4


def test_token_probability_replaces_the_prior() -> None:
    assert vlm(mean_token_prob=0.99) == 0.99
    assert vlm(mean_token_prob=0.99, retry_reasons=["repetition"]) == pytest.approx(0.693)
    assert vlm(mean_token_prob=0.4) < vlm()


def test_fallback_pages_score_below_every_read_page() -> None:
    from_layer = page_score("fallback", "ok", {"text_layer_score": 0.95, "fallback": "x"})
    assert from_layer == pytest.approx(FALLBACK_FACTOR * 0.95)
    unknown = page_score("fallback", "ok", {"fallback": "engine"})
    assert unknown is not None and unknown <= 0.5
    read = vlm(retry_reasons=["truncated"])
    assert from_layer is not None and read is not None and from_layer < read


def test_mean_token_prob_is_the_geometric_mean() -> None:
    logprobs = [math.log(0.9), math.log(0.4), math.log(1.0)]
    assert mean_token_prob(logprobs) == pytest.approx((0.9 * 0.4 * 1.0) ** (1 / 3), abs=1e-4)
    assert mean_token_prob([]) is None
    assert mean_token_prob([-9999.0, -0.01]) == pytest.approx(0.0, abs=1e-9)


def test_spread_counts_each_bucket_and_unknown() -> None:
    counts = spread([0.1, 0.49, 0.5, 0.79, 0.8, 0.949, 0.95, 1.0, None])
    assert counts == {"<0.5": 2, "0.5-0.8": 2, "0.8-0.95": 2, ">=0.95": 2, "unknown": 1}
    assert bucket(0.0) == "<0.5" and bucket(0.95) == ">=0.95"


def test_page_confidence_reads_a_page_result() -> None:
    page = PageResult(
        3, "text", Route.ENGINE, attempts=2,
        attributes={"finish_reason": "stop", "retry_reasons": ["repetition"]},
    )  # fmt: skip
    assert page_confidence(page) == pytest.approx(0.63)
    tess = PageResult(1, "ab", Route.ENGINE, blocks=(Block(BlockLabel.TEXT, "ab", confidence=0.5),))
    assert page_confidence(tess) == 0.5
    failed = PageResult(1, "", Route.NONE, PageStatus.FAILED)
    assert page_confidence(failed) == 0.0


# -- the wire ---------------------------------------------------------------------------


def _request() -> PageRequest:
    return PageRequest(image=PageImage(b"png", 1, 1), prompt="read", temperature=0.2)


def test_logprobs_are_asked_for_only_when_wanted() -> None:
    assert "logprobs" not in json.loads(request_body(_request(), "m"))
    body = json.loads(request_body(_request(), "m", logprobs=True))
    assert body["logprobs"] is True and "top_logprobs" not in body


def test_a_reply_with_logprobs_carries_its_mean_token_probability() -> None:
    content = [{"token": t, "logprob": lp} for t, lp in (("a", -0.1), ("b", -0.3), ("c", 0.0))]
    payload = {
        "choices": [
            {
                "message": {"content": "abc"},
                "finish_reason": "stop",
                "logprobs": {"content": content},
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3},
    }
    reply = parse_reply(payload, 0.1, "openai", "http://x/v1")
    assert reply.attributes["mean_token_prob"] == pytest.approx(math.exp(-0.4 / 3), abs=1e-4)
    assert reply.attributes["logprob_tokens"] == 3
    without = {**payload, "choices": [{"message": {"content": "abc"}, "logprobs": None}]}
    assert parse_reply(without, 0.1, "openai", "u").attributes == {}
    assert token_probability({"content": []}) == {}
    assert token_probability("nonsense") == {}


# -- what carries it: Parquet, done markers, review's order ------------------------------


def _pages(*confidences: float | None) -> tuple[PageResult, ...]:
    """Pages whose scores are known in advance: text-layer pages with that layer score
    (``None``: a blank page)."""
    return tuple(
        PageResult(n, f"page {n}", Route.TEXT_LAYER, attributes={"text_layer_score": c})
        if c is not None
        else PageResult(n, "", Route.BLANK)
        for n, c in enumerate(confidences, start=1)
    )


def test_parquet_pages_carry_it_and_older_shards_still_read(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    meta = DocumentMeta("a/doc.pdf", "ab" * 32, 1_700_000_000.0, "fake", "fp")
    # A shard as written before pages had a confidence: the old struct, by hand.
    old_page = pa.struct([(f.name, f.type) for f in PAGE_TYPE if f.name != "confidence"])
    old_schema = pa.schema(
        [pa.field(f.name, pa.list_(old_page)) if f.name == "pages" else f for f in DOCUMENT_SCHEMA]
    )
    row = document_row(DocumentResult("old", "/in/old.pdf", DocStatus.OK, _pages(0.9)), meta)
    for page in row["pages"]:
        del page["confidence"]
    store.write_bytes(
        "parquet/w0-00000.parquet", table_bytes(pa.Table.from_pylist([row], old_schema))
    )
    sink = ParquetSink(store, "w1")
    sink.write(
        FinishedDocument(DocumentResult("new", "/in/n.pdf", DocStatus.OK, _pages(0.93, None)), meta)
    )
    sink.close()
    rows = {r["id"]: r for r in read_documents(store).to_pylist()}
    assert [p["confidence"] for p in rows["new"]["pages"]] == [0.93, None]
    assert [p["confidence"] for p in rows["old"]["pages"]] == [None]
    assert finalize_shards(store, {"new", "old"}).rows_kept == 2


def _marker(doc_id: str, *confidences: float | None) -> DoneRecord:
    result = DocumentResult(doc_id, f"/in/{doc_id}.pdf", DocStatus.OK, _pages(*confidences))
    pages = [PageSummary(**page_to_dict(p)) for p in result.pages]
    return DoneRecord(doc_id=doc_id, source=result.source, pages=tuple(pages), rel=doc_id)


def test_markers_score_as_the_pages_and_spread_counts_them() -> None:
    markers = [_marker("a", 0.97, 0.3), _marker("b", 0.85, None), _marker("c", 0.6)]
    assert [s.confidence for s in scored_pages(markers[0])] == [0.97, 0.3]
    spread = confidence_spread(markers, keep=2)
    assert spread["pages"] == {"<0.5": 1, "0.5-0.8": 1, "0.8-0.95": 1, ">=0.95": 1, "unknown": 1}
    assert spread["shares"]["unknown"] == 0.2
    assert [(w["doc_id"], w["page"], w["confidence"]) for w in spread["lowest"]] == [
        ("a", 2, 0.3),
        ("c", 1, 0.6),
    ]


def test_review_keeps_documents_under_the_bar_worst_first() -> None:
    markers = [_marker("a", 0.97, 0.7), _marker("b", 0.85), _marker("c", 0.4), _marker("d")]
    only = parse_only(["low-confidence"])
    assert [r.doc_id for r in select_records(markers, only=only)] == ["c", "a"]
    below = parse_only([low_confidence_filter(0.9)])
    assert below == ("low-confidence<0.9",) and confidence_bar(below) == 0.9
    assert [r.doc_id for r in select_records(markers, only=below)] == ["c", "a", "b"]
    sampled = select_records(markers, only=below, sample=3, seed=1)
    assert [r.doc_id for r in sampled] == ["c", "a", "b"]
    # Other filters keep their stream order and mix with it.
    assert [r.doc_id for r in select_records(markers, only=("failed",))] == []
    with pytest.raises(ConfigError):
        parse_only(["low-confidence<2"])
    with pytest.raises(ConfigError):
        low_confidence_filter(0)
