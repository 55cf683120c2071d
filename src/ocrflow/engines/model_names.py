"""Which model names ocrflow accepts, checked in one place (CLI, ``ocrflow serve``, jobs,
the managed vLLM's command line).

A model that a server loads (``--engine vllm``) is a Hugging Face repository id
(``owner/name`` or a bare ``name``) or a path the operator gave (absolute, or ``./``
relative); a name that an OpenAI-compatible server knows a model by is free-form text.
Neither may start with ``-`` (a command line would read it as an option), hold whitespace
or control characters, or be longer than ``MAX_NAME_CHARS``.
"""

from __future__ import annotations

import re

from ocrflow.errors import ConfigError

MAX_NAME_CHARS = 512
#: One part of a repository id, as the Hugging Face Hub allows it (no leading ``.`` or ``-``).
_REPO_PART = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_REPO_ID = re.compile(rf"{_REPO_PART}(?:/{_REPO_PART})?")


class ModelNameError(ConfigError):
    """A model name that ocrflow refuses; the message says why."""


def check_served_name(name: str) -> str:
    """``name`` when a server may know a model by it; ``ModelNameError`` otherwise."""
    if not name:
        raise ModelNameError("a model name may not be empty")
    if len(name) > MAX_NAME_CHARS:
        raise ModelNameError(f"model name longer than {MAX_NAME_CHARS} characters")
    if name.startswith("-"):
        raise ModelNameError(f"model name {name!r} starts with '-' (it would read as an option)")
    if not name.isprintable() or any(c.isspace() for c in name):
        raise ModelNameError(f"model name {name!r} holds whitespace or control characters")
    return name


def is_repo_id(name: str) -> bool:
    """True for a Hugging Face repository id: ``name`` or ``owner/name``, no ``..``."""
    return _REPO_ID.fullmatch(name) is not None and ".." not in name


def is_model_path(name: str) -> bool:
    """True for a local path given as one: absolute or ``./``, no ``..`` or empty parts."""
    if not name.startswith(("/", "./")):
        return False
    body = name[1:] if name.startswith("/") else name[2:]
    parts = body.removesuffix("/").split("/")
    return all(part and part not in (".", "..") for part in parts)


def check_model_name(name: str) -> str:
    """``name`` when a server may load it: a repository id or a local path (see the module);
    ``ModelNameError`` otherwise."""
    check_served_name(name)
    if not (is_repo_id(name) or is_model_path(name)):
        raise ModelNameError(
            f"model {name!r} is neither a Hugging Face repository id (owner/name) "
            "nor a path ('/…' or './…' without '..')"
        )
    return name
