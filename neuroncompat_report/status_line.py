"""One line of stderr, redrawn in place while a command works, only where a person watches.

`neuron-migrate` over a large tree and `neuroncompat check` each ran for minutes or half a minute silent
until their report. On a terminal they now show where they are on one stderr line, redrawn with ``\\r`` and
erased (``\\x1b[K``) before the report, so the report starts at the left margin; anywhere else (a pipe, a CI
log, a pre-commit hook) nothing is written, so captured output is exactly the report. One class for both,
so the two commands draw and erase their line the same way.
"""

from __future__ import annotations

import sys
from typing import TextIO

_ERASE = "\r\x1b[K"


class StatusLine:
    """``PREFIX: TEXT`` on one line of ``stream``, redrawn at each :meth:`show`."""

    def __init__(self, prefix: str, stream: TextIO) -> None:
        self.prefix = prefix
        self.stream = stream

    def show(self, text: str) -> None:
        self.stream.write(f"{_ERASE}{self.prefix}: {text}")
        self.stream.flush()

    def close(self) -> None:
        """Erase the line, so the report starts at the left margin."""
        self.stream.write(_ERASE)
        self.stream.flush()


def watched() -> bool:
    """Whether stderr is a terminal (a person watching), where a status line belongs."""
    return sys.stderr.isatty()
