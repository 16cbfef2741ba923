"""The CUDA redirect's in-process cases (``tests/isolated/redirect_cases.py``), in their own interpreter.

The redirect replaces torch entry points process-wide. ``neuroncompat.cuda.undo()`` puts them back,
but torch and Dynamo keep per-process caches keyed on those functions (trace rules, compiled
frames' guards), so after a compile under the redirect later compiles in the same process can trace
wrongly; on a user's machine the redirect lives as long as the script. The cases therefore run in a
fresh pytest process, and this test reports their outcome.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CASES = Path(__file__).resolve().parent / "isolated" / "redirect_cases.py"


def _run_cases(marker: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker, str(CASES)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=CASES.parents[2],
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout.strip().splitlines()[-1]


def test_redirect_cases_pass_in_a_fresh_process() -> None:
    _run_cases("not slow")


@pytest.mark.slow
def test_redirect_slow_cases_pass_in_a_fresh_process() -> None:
    """The cases that start interpreters of their own (off by default, refusal without Neuron)."""
    _run_cases("slow")
