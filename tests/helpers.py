"""Helpers the tests import: running code in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
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
