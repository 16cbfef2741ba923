"""`neuron-migrate` over a tree shows files done / total on stderr, only where stderr is a terminal (issue 45 item 6).

The terminal is a real pseudo-terminal (`pty`): the process sees `isatty()` true on stderr, as in a
shell, while stdout stays a pipe. Without one (captured output, CI logs) stderr holds the report only.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import stderr_on_a_terminal

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = [p for p in sorted((ROOT / "fixtures" / "cuda").glob("*.py")) if not p.name.endswith(".expected.py")][:6]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for script in SCRIPTS:
        shutil.copy(script, tmp_path / script.name)
    return tmp_path


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_progress_on_a_terminal(tree: Path, jobs: str) -> None:
    status, stdout, terminal = stderr_on_a_terminal([sys.executable, "-m", "migrate", "--check", "-j", jobs, "."], tree)
    assert status == 1
    total = len(SCRIPTS)
    assert f"\r\x1b[Kneuron-migrate: {total}/{total} files".encode() in terminal, terminal
    assert b"\r\x1b[K" in terminal  # the line is erased before the summary
    assert b"files" not in stdout


def test_no_progress_without_a_terminal(tree: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "migrate", "--check", "-j", "1", "."], cwd=tree, capture_output=True, timeout=120
    )
    assert done.returncode == 1
    assert b"\r" not in done.stderr and b" files\r" not in done.stderr
    assert done.stderr.startswith(f"neuron-migrate: {len(SCRIPTS)} files scanned".encode())
