"""fakevllm: our OpenAI-compatible test server with a capacity model and fault injection.

Start it as a process with ``python -m tests.fakevllm.server --port 0 [flags]`` or, from
Python, with :func:`tests.fakevllm.process.running_server`. ``server.py`` documents the
flags, the capacity model and each fault.
"""

from __future__ import annotations
