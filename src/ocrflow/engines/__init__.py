"""Engines are transports: ``infer(PageRequest) -> EngineReply``. They know no documents."""
