"""Inputs: expand what the user named (files, folders, globs, ``@lists``, fsspec URLs,
Parquet and ``save_to_disk`` datasets) into ``Source``s, and count what was left out."""
