"""Recipes whose prompt is picked by a ``task`` option among the model's element prompts
(PaddleOCR-VL's ``OCR:`` / ``Table Recognition:`` …, GLM-OCR's ``Text Recognition:`` …)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ocrflow.recipes.base import ChatRecipe
from ocrflow.recipes.markup import check_table_format


class TaskPromptRecipe(ChatRecipe):
    """Mixed into a recipe's frozen dataclass that has ``task`` and ``table_format`` fields
    and a ``TASK_PROMPTS`` class mapping: checks both options, and makes the prompt."""

    __slots__ = ()
    TASK_PROMPTS: ClassVar[Mapping[str, str]]
    task: str
    table_format: str

    def __post_init__(self) -> None:
        check_table_format(self.table_format)
        if self.task not in self.TASK_PROMPTS:
            known = ", ".join(self.TASK_PROMPTS)
            raise ValueError(f"task must be one of {known}, got {self.task!r}")

    @property
    def prompt(self) -> str:
        """The model authors' prompt for ``task``."""
        return self.TASK_PROMPTS[self.task]
