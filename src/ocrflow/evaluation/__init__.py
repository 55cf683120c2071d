"""Measure OCR output: olmOCR-bench unit tests (``bench``) and text metrics (``metrics``).

Public entry points: :func:`ocrflow.evaluation.metrics.cer`, :func:`~.metrics.word_f1`,
:func:`~.metrics.score_text`, :func:`ocrflow.evaluation.bench.load_tests` and
:func:`~.bench.run_tests`.
"""
