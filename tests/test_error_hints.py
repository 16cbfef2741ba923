"""The line after the traceback when a script and the machine disagree about the device.

Off Neuron, a migrated script run with plain ``python``: the traceback as Python prints it, then one
line pointing at the simulator; nothing else changes. On Neuron (here the simulator), a CUDA script
run under the shim alone: its ``Torch not compiled with CUDA enabled`` ends with the CUDA redirect
and ``neuron-migrate``."""

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


@pytest.mark.parametrize(
    "line",
    [
        'torch.ones(2).to("neuron")',
        'torch.zeros(1, device="neuron:1")',
        'model = torch.nn.Linear(2, 2).to(torch.device("neuron"))',
    ],
    ids=["to", "factory", "module"],
)
def test_the_neuron_device_string_ends_with_the_simulator_hint(tmp_path: Path, line: str) -> None:
    """Issue 27 H1: ``.to("neuron")`` off Neuron is torch's bare RuntimeError, not an AttributeError."""
    (tmp_path / "train.py").write_text(f"import neuroncompat\nimport torch\n\n{line}\n")
    result = _run(["train.py"], tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode == 1
    assert lines[-2].startswith("RuntimeError: Expected one of cpu") and lines[-2].endswith("device string: neuron")
    assert lines[-1] == (
        "neuroncompat: torch does not know the 'neuron' device: no Neuron device (torch-neuronx) on this machine. "
        "Dry-run the script on the simulated device: NEURONCOMPAT_SIMULATE=1 python -m neuroncompat train.py "
        "(or neuroncompat simulate -- python train.py)"
    )


CUDA_SCRIPT = "import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\n"


@pytest.mark.parametrize("runner", [[], ["-m", "neuroncompat"]], ids=["import neuroncompat", "python -m neuroncompat"])
def test_a_cuda_script_under_the_shim_alone_ends_with_the_redirect_and_the_codemod(
    tmp_path: Path, runner: list[str]
) -> None:
    (tmp_path / "train.py").write_text(("import neuroncompat\n" if not runner else "") + CUDA_SCRIPT)
    result = _run([*runner, "train.py"], tmp_path, NEURONCOMPAT_SIMULATE="1")
    lines = result.stderr.splitlines()
    assert result.returncode == 1
    assert lines[-2] == "AssertionError: Torch not compiled with CUDA enabled"
    assert lines[-1] == (
        "neuroncompat: this script uses CUDA, and this machine's accelerator is the NeuronCore (device 'neuron'). "
        "Run it as written with the CUDA redirect: NEURONCOMPAT_SIMULATE=1 NEURONCOMPAT_CUDA=redirect "
        "python -m neuroncompat train.py; or rewrite it for Neuron: neuron-migrate train.py "
        "(shows the diff; --write applies it)"
    )


def test_on_the_simulated_device_other_errors_and_the_redirect_get_no_hint(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import sys, neuroncompat, torch\nprint(torch.neuron.is_available())\ntorch.no_such_thing\n"
    )
    result = _run(["train.py"], tmp_path, NEURONCOMPAT_SIMULATE="1")
    assert result.returncode == 1 and result.stdout == "True\n"
    assert result.stderr.splitlines()[-1] == "AttributeError: module 'torch' has no attribute 'no_such_thing'"
    (tmp_path / "redirected.py").write_text(
        CUDA_SCRIPT + "print(model.weight.device)\nraise AssertionError('Torch not compiled with CUDA enabled')\n"
    )
    result = _run(
        ["-m", "neuroncompat", "redirected.py"], tmp_path, NEURONCOMPAT_SIMULATE="1", NEURONCOMPAT_CUDA="redirect"
    )
    assert result.returncode == 1 and result.stdout == "neuron:0\n"
    assert "NEURONCOMPAT_CUDA=redirect python" not in result.stderr, "the redirect is on: no advice to turn it on"


DDP_SCRIPT = """import os

import torch

rank = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(rank)
"""


@pytest.mark.parametrize("runner", [[], ["-m", "neuroncompat"]], ids=["import neuroncompat", "python -m neuroncompat"])
def test_any_error_of_a_torch_cuda_call_in_the_script_ends_with_the_redirect_and_the_codemod(
    tmp_path: Path, runner: list[str]
) -> None:
    """Issue 41: ``torch.cuda.set_device`` dies of torch's own AttributeError, not "Torch not compiled with CUDA"."""
    (tmp_path / "ddp.py").write_text(("import neuroncompat\n" if not runner else "") + DDP_SCRIPT)
    result = _run([*runner, "ddp.py"], tmp_path, NEURONCOMPAT_SIMULATE="1")
    lines = result.stderr.splitlines()
    assert result.returncode == 1
    assert lines[-2] == "AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'"
    line = 7 if not runner else 6
    assert lines[-1] == (
        f"neuroncompat: this script uses CUDA (ddp.py:{line} calls torch.cuda.set_device), and this machine's "
        "accelerator is the NeuronCore (device 'neuron'). Run it as written with the CUDA redirect: "
        "NEURONCOMPAT_SIMULATE=1 NEURONCOMPAT_CUDA=redirect python -m neuroncompat ddp.py; or rewrite it for "
        "Neuron: neuron-migrate ddp.py (shows the diff; --write applies it)"
    )


def test_a_torch_cuda_call_made_by_a_library_is_not_named_as_the_scripts(tmp_path: Path) -> None:
    """``torch.random.fork_rng`` (torch's code, not the script's) calls ``torch.cuda``: the line names no call site."""
    (tmp_path / "train.py").write_text(
        "import neuroncompat\nimport torch\n\ntorch.random.fork_rng(devices=[0], device_type='cuda').__enter__()\n"
    )
    result = _run(["train.py"], tmp_path, NEURONCOMPAT_SIMULATE="1")
    lines = result.stderr.splitlines()
    assert result.returncode == 1 and lines[-2] == "AssertionError: Torch not compiled with CUDA enabled"
    assert lines[-1].startswith("neuroncompat: this script uses CUDA, and this machine's accelerator is the NeuronCore")
