"""The engine contract every transport honours."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ocrflow.types import EngineReply, PageRequest


@runtime_checkable
class Engine(Protocol):
    """Turns one page request into one reply; raises ``EngineError`` subclasses on failure."""

    name: str
    #: "raw" when the engine wants pixels, or an encoding ("png", "jpeg") for the wire.
    image_encoding: str

    async def infer(self, request: PageRequest) -> EngineReply: ...

    async def aclose(self) -> None: ...
