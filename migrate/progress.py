"""Files done / total on stderr while `neuron-migrate` works through a tree, only where a person watches.

Over a large tree (transformers' `models/`: 2,544 files, minutes) the command was silent until the
report. On a terminal, one stderr line is redrawn in place (`\\r`) and erased before the report;
anywhere else (a pipe, a CI log, a pre-commit hook) nothing is written, so captured output stays
exactly the report.
"""

from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    """`neuron-migrate: DONE/TOTAL files` on one line of `stream`, redrawn at each call."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.stream = stream

    def __call__(self, done: int) -> None:
        self.stream.write(f"\rneuron-migrate: {done}/{self.total} files")
        self.stream.flush()

    def close(self) -> None:
        """Erase the line, so the report starts at the left margin."""
        self.stream.write("\r\x1b[K")
        self.stream.flush()


def on_terminal(total: int, quiet: bool) -> Progress | None:
    """A `Progress` on stderr where it is a terminal and there is more than one file; else None."""
    if quiet or total < 2 or not sys.stderr.isatty():
        return None
    return Progress(total, sys.stderr)
