"""Read the few vLLM Prometheus metrics the client steers by."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

_WANTED = {
    "vllm:num_requests_waiting": "waiting",
    "vllm:num_requests_running": "running",
    "vllm:kv_cache_usage_perc": "kv_cache",
}
#: Older names of the same gauges, read only when a server does not export the new name
#: (vLLM exported both for a while: summing them would count the cache twice).
_DEPRECATED = {
    "vllm:gpu_cache_usage_perc": "kv_cache",
}


def parse_vllm_metrics(text: str) -> dict[str, float]:
    """``{"waiting": …, "running": …, "kv_cache": …}`` summed over models; ``{}`` if none."""
    found: dict[str, float] = {}
    fallback: dict[str, float] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:
        return found
    for family in families:
        for sample in family.samples:
            for names, into in ((_WANTED, found), (_DEPRECATED, fallback)):
                key = names.get(sample.name)
                if key is not None:
                    into[key] = into.get(key, 0.0) + float(sample.value)
    return {**fallback, **found}
