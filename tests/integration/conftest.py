"""Fixtures shared by the integration tests' modules."""

# The slow fake vLLM of the job-service tests (one per module that asks for it).
from tests.integration.serve_engine import slow_engine  # noqa: F401
