"""Which rank failed, with what: one line per failed process instead of the launcher's error dump.

When a ``torchrun`` or ``accelerate launch`` rank raises, the user sees the rank's traceback and
then 40-60 lines from the launcher: its own traceback through ``torch.distributed.elastic``, a
``ChildFailedError`` table with time, host, pid and "To enable traceback see ...", and glog lines
about SIGTERM. None of it says more than "rank 1 failed". Under ``neuroncompat simulate`` each
process that dies of an exception writes ``failure-<pid>.json`` (rank, exception type, first line
of the message, and the innermost frame in the user's code) into the record directory, and
:func:`summary` turns those into the lines printed after the launcher exits.
"""

from __future__ import annotations

import json
import os
import sysconfig
from pathlib import Path
from types import TracebackType
from typing import Any

from neuroncompat import environment
from neuroncompat.simulate import RECORD_ENV

_LIBRARY_DIRS = tuple(
    os.path.normcase(os.path.realpath(p)) + os.sep
    for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], sysconfig.get_paths()["stdlib"]}
)


def _where(exc: BaseException, tb: TracebackType | None) -> tuple[str | None, int | None]:
    """The innermost frame outside the installed libraries and the stdlib (the user's line), else the innermost."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return exc.filename, exc.lineno
    innermost: tuple[str | None, int | None] = (None, None)
    user: tuple[str | None, int | None] = (None, None)
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        innermost = (filename, tb.tb_lineno)
        real = os.path.normcase(os.path.realpath(filename))
        if not filename.startswith("<") and not real.startswith(_LIBRARY_DIRS):
            user = innermost
        tb = tb.tb_next
    return user if user[0] is not None else innermost


def note(exc: BaseException, tb: TracebackType | None) -> None:
    """Record this process's uncaught exception where ``neuroncompat simulate`` reads it (if it does)."""
    directory = environment.path(RECORD_ENV)
    if not directory:
        return
    filename, line = _where(exc, tb)
    message = str(exc).strip().splitlines()
    record = {
        "rank": int(os.environ.get("RANK", "0")),
        "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
        "pid": os.getpid(),
        "type": type(exc).__name__,
        "message": message[0] if message else "",
        "file": os.path.relpath(filename) if filename and not filename.startswith("<") else filename,
        "line": line,
    }
    try:
        Path(directory, f"failure-{os.getpid()}.json").write_text(json.dumps(record))
    except OSError:
        pass  # the directory is gone (the parent stopped): the traceback was printed anyway


def load(directory: str | Path) -> list[dict[str, Any]]:
    """The failures the processes wrote, by rank then pid."""
    records = [json.loads(path.read_text()) for path in Path(directory).glob("failure-*.json")]
    return sorted(records, key=lambda r: (r["rank"], r["pid"]))


def summary(failures: list[dict[str, Any]], launcher: str, exit_code: int) -> list[str]:
    """``rank 1 failed: RuntimeError: rank 1 fails (train.py:17)`` per failure, or why nothing was recorded."""
    if not failures:
        return [
            f"{launcher} exited with {exit_code}; no rank raised a Python exception "
            "(stopped by a signal, or the launcher itself failed)"
        ]
    lines = []
    for failure in failures:
        where = f" ({failure['file']}:{failure['line']})" if failure.get("file") else ""
        message = f": {failure['message']}" if failure["message"] else ""
        lines.append(f"rank {failure['rank']} failed: {failure['type']}{message}{where}")
    return lines
