"""Recipes: one module a model family, data plus a parser."""
