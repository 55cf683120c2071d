"""Read the few vLLM Prometheus metrics the client steers by."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

_WANTED = {
    "vllm:num_requests_waiting": "waiting",
    "vllm:num_requests_running": "running",
    "vllm:kv_cache_usage_perc": "kv_cache",
    "vllm:gpu_cache_usage_perc": "kv_cache",
}


def parse_vllm_metrics(text: str) -> dict[str, float]:
    """``{"waiting": …, "running": …, "kv_cache": …}`` summed over models; ``{}`` if none."""
    found: dict[str, float] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:
        return found
    for family in families:
        for sample in family.samples:
            key = _WANTED.get(sample.name)
            if key is not None:
                found[key] = found.get(key, 0.0) + float(sample.value)
    return found
