"""What a run tells people and machines: its statistics, Prometheus metrics, progress lines,
``ocrflow status`` and the printed summaries."""
