"""Reading vLLM's Prometheus text: the gauges the client steers by, each counted once."""

from __future__ import annotations

from ocrflow.engines.metrics import parse_vllm_metrics

HEAD = """# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
# HELP vllm:num_requests_running Number of requests running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 7.0
"""
NEW = """# HELP vllm:kv_cache_usage_perc KV-cache usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.35
"""
OLD = """# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage (deprecated).
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:gpu_cache_usage_perc{engine="1",model_name="m"} 0.35
"""


def test_the_new_kv_cache_gauge_wins_over_the_deprecated_one() -> None:
    # vLLM exported both names for a while, with the same values: summing doubled it.
    for text in (HEAD + NEW + OLD, HEAD + OLD + NEW):
        found = parse_vllm_metrics(text)
        assert found == {"waiting": 3.0, "running": 7.0, "kv_cache": 0.6}


def test_the_deprecated_kv_cache_gauge_is_read_when_alone() -> None:
    assert parse_vllm_metrics(HEAD + OLD)["kv_cache"] == 0.6


def test_no_kv_cache_gauge_no_key() -> None:
    assert parse_vllm_metrics(HEAD) == {"waiting": 3.0, "running": 7.0}
    assert parse_vllm_metrics("not { prometheus") == {}
