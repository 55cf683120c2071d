"""Attacks on the service's trust boundary, one module per class (docs/security.md)."""
