"""Byte stores: the local disk and fsspec object stores behind one ``Store`` protocol
(atomic writes, conditional writes, listing), Parquet shards, and output names that stay
inside OUT and fit in a file system's bytes."""
