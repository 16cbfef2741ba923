"""The step ``neuroncompat check`` is at, on one stderr line, only where a person watches.

A check takes about 30 s (the worker's imports, then a stage each for load, generate and two training
steps) and printed nothing until the report. The line (``neuroncompat_report.status_line``'s, as
``neuron-migrate`` draws its own) is redrawn as the worker starts each step: it writes ``MODEL_INDEX STEP``
lines to a pipe, ``check_many``'s ``progress``.
"""

from __future__ import annotations

import sys
from typing import TextIO

from neuroncompat_report.status_line import StatusLine, watched

_STEPS = {"build": "building the tiny model"}


class StageProgress(StatusLine):
    """``neuroncompat check: MODEL: STEP``."""

    def __init__(self, models: list[str], stream: TextIO) -> None:
        super().__init__("neuroncompat check", stream)
        self.models = models

    def start(self) -> None:
        self.show("starting (imports torch and transformers)")

    def __call__(self, index: int, step: str) -> None:
        self.show(f"{self.models[index]}: {_STEPS.get(step, f'stage {step}')}")


def on_terminal(models: list[str]) -> StageProgress | None:
    """A ``StageProgress`` on stderr where it is a terminal; else None."""
    return StageProgress(models, sys.stderr) if watched() else None
