"""The launcher's stderr, shown without the launcher's own error dump (kept whole in a log file).

``torchrun`` and ``accelerate launch`` share one stderr with their ranks. Everything the ranks
write (the user's prints, warnings, logging and tracebacks) passes through unchanged, line by
line. Left out, and only written to the log file: torch.distributed's glog lines
(``W1201 12:00:00.000000 123 .../torch/distributed/run.py:874] ...``: the OMP_NUM_THREADS notice,
"Sending process ... closing signal SIGTERM", "failed (exitcode: 1) local_rank: 1"), and, from the
first traceback that starts in the launcher itself (torchrun's ``ChildFailedError`` table,
accelerate's ``CalledProcessError``), the rest of the stream: the launcher is dying and says
nothing the failure summary (:mod:`neuroncompat.simulate.failures`) does not say better.
"""

from __future__ import annotations

import re
import threading
from typing import IO

_GLOG = re.compile(rb"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S*torch/distributed/\S*\] ")
_TRACEBACK = b"Traceback (most recent call last):"
_FRAME = re.compile(rb'^  File "([^"]*)", line \d+')
_LAUNCHER_FRAME = re.compile(
    rb"(?:/bin/(?:torchrun|accelerate)$|torch/distributed/|accelerate/commands/|accelerate/utils/launch)"
)


class LauncherOutput:
    """Copies ``source`` to ``shown`` (the terminal) and everything to ``log``, in a thread."""

    def __init__(self, source: IO[bytes], shown: IO[bytes], log: IO[bytes]) -> None:
        self._source, self._shown, self._log = source, shown, log
        self.hidden = 0  # lines written to the log only
        self._thread = threading.Thread(target=self._copy, name="neuroncompat-launcher-output", daemon=True)
        self._thread.start()

    def join(self) -> None:
        self._thread.join()
        self._log.flush()

    def _show(self, line: bytes) -> None:
        self._shown.write(line)
        self._shown.flush()

    def _copy(self) -> None:
        pending: bytes | None = None  # a "Traceback" line waiting for its first frame
        dropping = False
        for line in iter(self._source.readline, b""):
            self._log.write(line)
            if dropping or _GLOG.match(line):
                self.hidden += 1
                continue
            if pending is not None:
                frame = _FRAME.match(line)
                if frame and _LAUNCHER_FRAME.search(frame.group(1)):
                    dropping, pending = True, None
                    self.hidden += 2
                    continue
                self._show(pending)
                pending = None
            if line.rstrip() == _TRACEBACK:
                pending = line
                continue
            self._show(line)
        if pending is not None:
            self._show(pending)
