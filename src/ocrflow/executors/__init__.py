"""Executors drive the pipeline over a workspace: local (asyncio + processes), ray."""
