"""The later stages of a run: describe figures with a VLM, assemble enriched documents."""
