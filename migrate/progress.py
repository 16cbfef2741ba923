"""Files done / total on stderr while `neuron-migrate` works through a tree, only where a person watches.

Over a large tree (transformers' `models/`: 2,544 files, minutes) the command was silent until the
report. The line is `neuroncompat_report.status_line`'s, as `neuroncompat check` draws its own.
"""

from __future__ import annotations

import sys

from neuroncompat_report.status_line import StatusLine, watched


class Progress(StatusLine):
    """`neuron-migrate: DONE/TOTAL files`, redrawn at each call."""

    def __init__(self, total: int) -> None:
        super().__init__("neuron-migrate", sys.stderr)
        self.total = total

    def __call__(self, done: int) -> None:
        self.show(f"{done}/{self.total} files")


def on_terminal(total: int, quiet: bool) -> Progress | None:
    """A `Progress` where stderr is a terminal and there is more than one file; else None."""
    if quiet or total < 2 or not watched():
        return None
    return Progress(total)
