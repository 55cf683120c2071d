"""ocrflow: documents to Markdown and JSONL with vision-language OCR models or a CPU engine."""

__version__ = "0.1.0"
