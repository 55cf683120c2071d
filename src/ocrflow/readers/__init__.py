"""One page through an engine and its recipe: the engine session, retries and fallbacks,
second passes and the canonical Markdown clean-up."""
