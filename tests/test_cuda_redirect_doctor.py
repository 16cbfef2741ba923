"""``neuroncompat doctor`` reports the CUDA redirect: off, on, or asked for where it cannot run.

Each case is a fresh ``neuroncompat doctor`` process (the redirect reads its variable at import).
Asked for without a Neuron device, the doctor must still report (the CLI holds the redirect's
refusal until it knows its subcommand) instead of dying with the refusal a script would get.
"""

from __future__ import annotations

import os

import pytest
from helpers import run_python

DOCTOR = "from neuroncompat.cli import main; main(['doctor'])"


def _doctor(**env: str) -> list[str]:
    result = run_python(DOCTOR, env={"HF_HUB_OFFLINE": "1", **env})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("CUDA redirect:"))
    return lines[start : start + 5]


def test_doctor_reports_the_redirect_off_by_default() -> None:
    lines = _doctor()
    assert lines[0].startswith("CUDA redirect: off (NEURONCOMPAT_CUDA unset; turn on with NEURONCOMPAT_CUDA=redirect")
    assert lines[3] == "  NEURONCOMPAT_CUDA_USER_PATHS: (unset)"


@pytest.mark.slow
def test_doctor_reports_the_redirect_on_with_the_callers_rule_and_user_paths() -> None:
    paths = os.pathsep.join(["/opt/vendored", "/srv/lib"])
    lines = _doctor(NEURONCOMPAT_SIMULATE="1", NEURONCOMPAT_CUDA="redirect", NEURONCOMPAT_CUDA_USER_PATHS=paths)
    assert lines[0] == "CUDA redirect: on (NEURONCOMPAT_CUDA=redirect): user code's CUDA calls run on the NeuronCore"
    assert "torch, transformers, accelerate, trl, peft" in lines[1]
    assert lines[3] == "  NEURONCOMPAT_CUDA_USER_PATHS: /opt/vendored, /srv/lib"


def test_doctor_reports_a_redirect_that_cannot_run_instead_of_failing() -> None:
    lines = _doctor(NEURONCOMPAT_CUDA="redirect")
    assert lines[0].startswith("CUDA redirect: requested (NEURONCOMPAT_CUDA=redirect) but unavailable")
    assert "RedirectUnavailable" in lines[0]
