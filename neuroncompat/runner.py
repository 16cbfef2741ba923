"""Run a script or module as ``__main__`` with the shim applied (``python -m neuroncompat``).

``python -m neuroncompat train.py --lr 1e-4`` behaves like ``python train.py --lr 1e-4``:
``sys.argv``, ``sys.path[0]``, ``__main__``, exit codes and exceptions are the script's own. The
package import has already applied the shim, so the script needs no edit; this is also what
``torchrun --nproc_per_node=N -m neuroncompat train.py`` runs in every rank. Processes the
script spawns (``torch.multiprocessing.spawn``) get the shim too (:mod:`neuroncompat.child_processes`).

:func:`main` (the command line) prints an uncaught exception as ``python train.py`` would:
the frames of this runner and of :mod:`runpy` that sit above the script's own frames are left
out, so a ``SyntaxError`` shows only the user's file and line, and a runtime error starts at the
script's ``<module>`` frame. Exit status 1, as Python's.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from types import TracebackType

from neuroncompat import child_processes, error_hints
from neuroncompat.simulate import RECORD_ENV

_TOOL_FILES = frozenset(os.path.normcase(os.path.abspath(f)) for f in (__file__, runpy.__file__))

USAGE = """usage: python -m neuroncompat SCRIPT.py [ARGS...]
       python -m neuroncompat -m MODULE [ARGS...]

Runs SCRIPT (or MODULE) with neuroncompat's runtime patches applied.
Also: `neuroncompat doctor` reports what applies on this machine."""


def run(argv: list[str]) -> None:
    """Execute ``argv[0]`` (a path, or ``-m module``) as ``__main__`` with ``argv`` as its argv."""
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        raise SystemExit(0 if argv else 2)
    child_processes.install()
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            raise SystemExit(2)
        sys.argv = argv[1:]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    script = argv[0]
    if not os.path.exists(script):
        print(f"neuroncompat: can't open file {script!r}: No such file or directory", file=sys.stderr)
        raise SystemExit(2)
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(os.path.abspath(script), run_name="__main__")  # as python makes __main__.__file__ absolute


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` without its leading frames from this module and runpy."""
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not (filename.startswith("<frozen runpy") or os.path.normcase(os.path.abspath(filename)) in _TOOL_FILES):
            break
        tb = tb.tb_next
    return tb


def main(argv: list[str]) -> None:
    """:func:`run` for the command line: the script's exception printed without the tool's frames."""
    try:
        run(argv)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:  # noqa: BLE001  (printed as the interpreter would, then exit 1)
        frames = _user_frames(exc.__traceback__)
        traceback.print_exception(type(exc), exc, frames)
        # as the interpreter records an uncaught exception (exit-time code, such as unused_device, reads it)
        sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, frames
        if sys.version_info >= (3, 12):
            sys.last_exc = exc
        error_hints.advise(exc)
        sys.stderr.flush()
        # under `neuroncompat simulate`, say which rank failed; accelerate launch's own error is about its ranks
        if os.environ.get(RECORD_ENV) and argv[:2] != ["-m", "accelerate.commands.launch"]:
            from neuroncompat.simulate import failures

            failures.note(exc, frames)
        raise SystemExit(1) from None
