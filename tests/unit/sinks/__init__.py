"""Tests of the output sinks."""
