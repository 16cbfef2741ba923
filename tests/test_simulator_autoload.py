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
from tests.launch import free_port, run_ranks, simulated_env


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
@pytest.mark.ranks
def test_bare_accelerate_launch_starts_one_process_per_requested_core(tmp_path):

    command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2"]
    command += ["--main_process_port", str(free_port()), "-m", "neuroncompat"]
    command.append(str(REPO / "tests" / "distributed" / "accelerate_world.py"))
    done = run_ranks(command, simulated_env(), tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    seen = sorted(re.findall(r"WORLD rank=\d+ size=\d+ device=\S+", done.stdout))
    assert seen == ["WORLD rank=0 size=2 device=neuron:0", "WORLD rank=1 size=2 device=neuron:1"], done.stdout


def test_an_unpatched_script_stays_unpatched_through_its_compiles():
    """The simulator's compile backend must not start the shim by a lazy import: ``neuroncompat`` is out of
    ``sys.modules`` after the autoload, so importing any of its submodules then re-runs ``neuroncompat/__init__``
    (which starts every patch) and every later compile is a false pass for a script that lacks the shim."""
    probe = (
        "import sys, torch\n"
        "def unpatched():\n"
        "    return ('neuroncompat' not in sys.modules, sys.modules['neuroncompat.shim'].is_active(),\n"
        "            torch._dynamo.config.automatic_dynamic_shapes)\n"
        "print(unpatched())\n"
        "f = torch.compile(lambda x: (x + 1).sum(), backend='neuron')\n"
        "for rows in (2, 3, 5):  # a static graph, then the automatic-dynamic one\n"
        "    f(torch.ones(rows, 4, device='neuron'))\n"
        "    print(unpatched())\n"
        "def broken(x):\n"
        "    y = x * 2\n"
        "    print('graph break')\n"
        "    return y + 1\n"
        "torch.compile(broken, backend='neuron')(torch.ones(2, device='neuron'))\n"
        "print(unpatched())\n"
        "from neuroncompat.simulator import compiles\n"
        "print([g.dynamic for g in compiles()])\n"
    )
    done = run_python(probe, env={"NEURONCOMPAT_SIMULATE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    states = [line for line in lines if line.startswith("(")]
    assert states == ["(True, False, True)"] * 5, done.stdout + done.stderr[-2000:]
    assert lines[-1] == "[False, True, False, False]", "the automatic-dynamic graph appears, as without the shim"


def test_the_simulator_imports_neuroncompat_modules_only_at_module_level():
    """What keeps the test above true for code not written yet: a ``neuroncompat`` import inside a simulator
    function runs after the autoload dropped the package, and would start the shim."""
    import ast

    nested = []
    for path in sorted((REPO / "neuroncompat" / "simulator").glob("*.py")):
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
                nested += [f"{path.name}:{node.lineno} {n}" for n in names if n.split(".")[0] == "neuroncompat"]
    assert nested == []
