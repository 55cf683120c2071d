"""fakevllm: our OpenAI-compatible test server with a capacity model and fault injection.

Start it as a process with ``python -m tests.fakevllm.server --port 0 [flags]`` or, from
Python, with :func:`tests.fakevllm.process.running_server`. ``server.py`` documents the
flags, the capacity model and each fault.

Modules: ``server`` (flags, app, entry point), ``state`` (config, faults, counters),
``chat_request`` (parsing, token estimates), ``completions`` (the completions endpoint),
``context_check`` (vLLM's context-length 400s and clamp), ``responses`` (bodies and
errors), ``observability`` (models, health, metrics, stats, admin), ``engine`` (capacity
model), ``replies`` and ``formats_*`` (reply texts), ``process`` (start one for a test),
``vllm_serve`` (played as ``vllm serve``), ``loadcheck`` (the server's own CPU cost).
"""

from __future__ import annotations
