"""``NEURONCOMPAT_SIMULATE=1`` makes ``import torch`` load the simulated device, as torch-neuronx's autoload does.

Found running the public TRL and accelerate scripts as their docs launch them: ``accelerate launch
--num_processes 2 -m neuroncompat sft.py`` started ONE process on the simulator (the launcher counts NeuronCores
before any rank runs the shim, and saw none), while a trn2 host starts two. The ``torch.backends`` entry point
(``neuroncompat_autoload``) is what makes the launcher see the device; it must be in the installed metadata
(``pip install -e .`` after pulling this change).
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import entry_points

import pytest

from tests.helpers import REPO, run_python
from tests.launch import free_port, simulated_env


def test_entry_point_is_installed():
    names = {entry.value for entry in entry_points(group="torch.backends")}
    assert "neuroncompat_autoload:load" in names, "reinstall the package (pip install -e .): its entry points changed"


def test_import_torch_sees_the_device_only_when_asked():
    probe = "import torch, sys; print(hasattr(torch, 'neuron') and torch.neuron.is_available())"
    on = run_python(probe, env={"NEURONCOMPAT_SIMULATE": "1"})
    off = run_python(probe)
    opted_out = run_python(probe, env={"NEURONCOMPAT_SIMULATE": "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert on.stdout.split() == ["True"], on.stderr[-2000:]
    assert off.stdout.split() == ["False"], off.stderr[-2000:]  # nothing loaded without the switch
    assert opted_out.stdout.split() == ["False"], opted_out.stderr[-2000:]


def test_the_autoload_starts_the_device_not_the_shim():
    """As on a trn2 (torch-neuronx's autoload knows nothing of neuroncompat), the patches start only where the
    script imports the shim: a dry run of a script without `import neuroncompat` must run it unpatched."""
    probe = (
        "import torch, sys\n"
        "print(torch.neuron.is_available(), 'neuroncompat' in sys.modules, sys.modules['neuroncompat.shim'].is_active())\n"
        "import neuroncompat\n"
        "print(neuroncompat.shim.is_active(), neuroncompat.simulator.is_enabled(), neuroncompat.status()['async_load'].state)  # waiting: for transformers\n"
    )
    done = run_python(probe, env={"NEURONCOMPAT_SIMULATE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "False", "False", "True", "True", "waiting"], (
        done.stdout + done.stderr[-2000:]
    )


@pytest.mark.slow
def test_bare_accelerate_launch_starts_one_process_per_requested_core(tmp_path):
    import subprocess

    command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2"]
    command += ["--main_process_port", str(free_port()), "-m", "neuroncompat"]
    command.append(str(REPO / "tests" / "distributed" / "accelerate_world.py"))
    done = subprocess.run(command, env=simulated_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    seen = sorted(re.findall(r"WORLD rank=\d+ size=\d+ device=\S+", done.stdout))
    assert seen == ["WORLD rank=0 size=2 device=neuron:0", "WORLD rank=1 size=2 device=neuron:1"], done.stdout
