"""A migrated script run with plain ``python`` where there is no Neuron: the traceback as Python
prints it, then one line pointing at the simulator; nothing else changes off Neuron."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MIGRATED = "import neuroncompat\nimport torch\n\nif torch.neuron.is_available():\n    print('on neuron')\n"
HINT = "neuroncompat: torch.neuron does not exist: no Neuron device (torch-neuronx) on this machine."


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("NEURONCOMPAT_")} | env
    return subprocess.run([sys.executable, *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("runner", [[], ["-m", "neuroncompat"]], ids=["python", "python -m neuroncompat"])
def test_missing_torch_neuron_ends_with_the_simulator_hint(tmp_path: Path, runner: list[str]) -> None:
    (tmp_path / "train.py").write_text(MIGRATED)
    result = _run([*runner, "train.py"], tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode == 1
    assert lines[0] == "Traceback (most recent call last):" and "line 4, in <module>" in lines[1]
    assert lines[-2] == "AttributeError: module 'torch' has no attribute 'neuron'"
    assert lines[-1] == (
        f"{HINT} Dry-run the script on the simulated device: NEURONCOMPAT_SIMULATE=1 python -m neuroncompat train.py "
        "(or neuroncompat simulate -- python train.py)"
    )


def test_other_errors_get_no_hint_and_torch_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "other.py").write_text(
        "import neuroncompat\nimport torch\nprint(hasattr(torch, 'neuron'))\ntorch.no_such_thing\n"
    )
    result = _run(["other.py"], tmp_path)
    assert result.returncode == 1 and result.stdout == "False\n"
    assert result.stderr.splitlines()[-1] == "AttributeError: module 'torch' has no attribute 'no_such_thing'"
    assert "neuroncompat" not in result.stderr


def test_on_the_simulated_device_the_hook_is_not_installed(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import sys, neuroncompat, torch\nprint(sys.excepthook is sys.__excepthook__, torch.neuron.is_available())\n"
    )
    assert _run(["train.py"], tmp_path, NEURONCOMPAT_SIMULATE="1").stdout == "True True\n"
