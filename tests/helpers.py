"""Helpers the tests import: running code in a fresh interpreter."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_python(
    code: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (a process that never saw the simulated device)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONCOMPAT_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def stderr_on_a_terminal(command: list[str], cwd: Path, timeout: int = 120) -> tuple[int, bytes, bytes]:
    """Run `command` with stderr on a pseudo-terminal: (exit status, stdout, what the terminal received)."""
    controller, terminal = pty.openpty()
    received = bytearray()

    def read() -> None:  # drained while the process runs, so a full terminal buffer never blocks it
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: every holder of the terminal side has closed it
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        done = subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE, stderr=terminal, timeout=timeout, check=False)
    finally:
        os.close(terminal)
        reader.join(timeout=30)
        os.close(controller)
    return done.returncode, done.stdout, bytes(received)
