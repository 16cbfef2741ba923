"""Run the user's command as a job of its own: a process group that the signals ``simulate`` gets are passed to.

Why: ``neuroncompat simulate`` is the parent of the user's script (or launcher). Killed with SIGTERM (a CI
timeout, ``kill``, a closed terminal's SIGHUP) it used to die alone: the script was re-parented to PID 1 and
ran on, and the temporary directories ``simulate`` cleans on its way out were left behind. Here the command
runs in its own process group, SIGINT, SIGTERM and SIGHUP sent to ``simulate`` are sent on to that whole
group (a launcher's ranks too), and ``simulate`` waits for the command to end before it goes on: its report,
then the removal of its temporary files, happen after the script is gone, whatever signal it got.

On a terminal the job also gets the terminal's foreground, as a shell gives it, so the script still reads
the keyboard (``input()``, ``pdb``) and Ctrl-C reaches it directly; the terminal is handed back afterwards.
A SIGKILL cannot be passed on: nothing here outlives ``kill -9 <simulate>``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _own_group() -> dict[str, Any]:
    """``Popen`` arguments that start the child as the leader of a new process group (same session)."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # before 3.11 there is no process_group; the child runs this alone


def _hand_terminal_to(group: int) -> Callable[[], None] | None:
    """Make ``group`` the terminal's foreground group where this process has it; the function that takes it
    back (None: no terminal of ours, nothing to hand over)."""
    try:
        fd = sys.stdin.fileno()
        if not os.isatty(fd) or os.tcgetpgrp(fd) != os.getpgrp():
            return None
        os.tcsetpgrp(fd, group)
    except (AttributeError, OSError, ValueError):
        return None
    os.killpg(group, signal.SIGCONT)  # a child that read the terminal before the hand-over was stopped by it

    def take_back() -> None:
        ignored = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may not set it otherwise
        try:
            os.tcsetpgrp(fd, os.getpgrp())
        except OSError:
            pass  # the terminal is gone (SIGHUP): nothing to take back
        finally:
            signal.signal(signal.SIGTTOU, ignored)

    return take_back


class Job:
    """The user's command in its own process group, with SIGINT/SIGTERM/SIGHUP passed on until it ends.

    Use as a context manager: entering starts the command, :meth:`wait` waits for it, leaving restores the
    signal handlers and the terminal. A signal that arrives before the command has started is passed on as
    soon as it has.
    """

    def __init__(self, argv: Sequence[str], env: dict[str, str], stderr: int | None = None) -> None:
        self._argv = list(argv)
        self._env = env
        self._stderr = stderr
        self._pending: list[int] = []
        self._previous: dict[int, Any] = {}
        self._take_back: Callable[[], None] | None = None
        self.process: subprocess.Popen[bytes] | None = None

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        if self.process is None:
            self._pending.append(signum)
            return
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            pass  # the whole group has already ended

    def __enter__(self) -> Job:
        if threading.current_thread() is threading.main_thread():  # only there can Python handle signals
            for signum in FORWARDED:
                self._previous[signum] = signal.signal(signum, self._forward)
        try:
            self.process = subprocess.Popen(self._argv, env=self._env, stderr=self._stderr, **_own_group())
        except BaseException:
            self._restore()
            raise
        self._take_back = _hand_terminal_to(self.process.pid)
        for pending in self._pending:
            self._forward(pending, None)
        return self

    def wait(self) -> int:
        """The command's return code, once it has ended (signals that arrive meanwhile are passed on)."""
        assert self.process is not None
        return self.process.wait()

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self._forward(signal.SIGTERM, None)  # leaving early (an error here): never leave the job running
            self.process.wait()
        if self._take_back is not None:
            self._take_back()
        self._restore()
