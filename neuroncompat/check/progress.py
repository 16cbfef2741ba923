"""The step ``neuroncompat check`` is at, on one stderr line, only where a person watches.

A check takes about 30 s (the worker's imports, then a stage each for load, generate and two training
steps) and printed nothing until the report. On a terminal one line is redrawn in place (``\\r``) as the
worker starts each step (it writes ``MODEL_INDEX STEP`` lines to a pipe, ``check_many``'s ``progress``)
and erased before the report; anywhere else nothing is written, so captured output is the report alone.
"""

from __future__ import annotations

import sys
from typing import TextIO

_STEPS = {"build": "building the tiny model"}


class StageProgress:
    """``neuroncompat check: MODEL: STEP`` on one line of ``stream``."""

    def __init__(self, models: list[str], stream: TextIO) -> None:
        self.models = models
        self.stream = stream

    def _show(self, text: str) -> None:
        self.stream.write(f"\r\x1b[Kneuroncompat check: {text}")
        self.stream.flush()

    def start(self) -> None:
        self._show("starting (imports torch and transformers)")

    def __call__(self, index: int, step: str) -> None:
        self._show(f"{self.models[index]}: {_STEPS.get(step, f'stage {step}')}")

    def close(self) -> None:
        """Erase the line, so the report starts at the left margin."""
        self.stream.write("\r\x1b[K")
        self.stream.flush()


def on_terminal(models: list[str]) -> StageProgress | None:
    """A ``StageProgress`` on stderr where it is a terminal; else None."""
    return StageProgress(models, sys.stderr) if sys.stderr.isatty() else None
