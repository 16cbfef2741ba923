"""The shim in fresh processes: import order, `python -m neuroncompat`, and off Neuron."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import run_python

PROBE = """
import json, os, torch, torch._dynamo.config
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained({model!r}, device_map="auto")
print(json.dumps({{
    "devices": sorted({{str(p.device) for p in model.parameters()}}),
    "automatic_dynamic_shapes": torch._dynamo.config.automatic_dynamic_shapes,
    "async_env": os.environ.get("HF_DEACTIVATE_ASYNC_LOAD"),
}}))
"""

SIMULATE = {"NEURONCOMPAT_SIMULATE": "1"}


def _last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
@pytest.mark.parametrize("order", ["shim-first", "shim-after-transformers"])
def test_import_order_gives_the_same_result(tiny_qwen: Path, order: str) -> None:
    probe = PROBE.format(model=str(tiny_qwen))
    code = (
        ("import neuroncompat\n" + probe)
        if order == "shim-first"
        else ("import transformers, torch._dynamo\nimport neuroncompat\n" + probe)
    )
    result = run_python(code, env=SIMULATE)
    assert result.returncode == 0, result.stderr
    assert _last_json(result.stdout) == {"devices": ["neuron:0"], "automatic_dynamic_shapes": False, "async_env": "1"}


def test_python_dash_m_runs_the_script_with_the_shim(tiny_qwen: Path, tmp_path: Path) -> None:
    import subprocess

    script = tmp_path / "train.py"
    script.write_text(
        "import sys\nprint('argv', sys.argv[1:], __name__)\n" + PROBE.format(model=str(tiny_qwen)) + "sys.exit(3)\n"
    )
    env = {**{k: v for k, v in __import__("os").environ.items() if not k.startswith("NEURONCOMPAT_")}, **SIMULATE}
    result = subprocess.run(
        [sys.executable, "-m", "neuroncompat", str(script), "--lr", "1e-4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 3, result.stderr
    assert "argv ['--lr', '1e-4'] __main__" in result.stdout
    assert _last_json(result.stdout) == {"devices": ["neuron:0"], "automatic_dynamic_shapes": False, "async_env": "1"}


def test_python_dash_m_keeps_the_scripts_traceback(tmp_path: Path) -> None:
    import os
    import subprocess

    script = tmp_path / "broken.py"
    script.write_text("def step():\n    raise ValueError('bad batch')\nstep()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONCOMPAT_")}
    result = subprocess.run(
        [sys.executable, "-m", "neuroncompat", str(script)], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert f'File "{script}", line 2, in step' in result.stderr
    assert result.stderr.rstrip().endswith("ValueError: bad batch")


def test_off_neuron_nothing_changes(tiny_qwen: Path) -> None:
    code = """
    import logging, io, json, os, sys
    stream = io.StringIO()
    logging.basicConfig(level=logging.DEBUG, stream=stream)
    env_before = dict(os.environ)
    import neuroncompat
    torch_imported_by_shim = "torch" in sys.modules
    import torch, torch._dynamo.config, transformers
    from transformers import AutoModelForCausalLM, PreTrainedModel
    model = AutoModelForCausalLM.from_pretrained(MODEL_PATH, device_map="auto")
    info_lines = [l for l in stream.getvalue().splitlines() if l.startswith(("INFO:neuroncompat", "WARNING:neuroncompat"))]
    print(json.dumps({
        "torch_imported_by_shim": torch_imported_by_shim,
        "env_changed": sorted(k for k in os.environ if env_before.get(k) != os.environ[k]),
        "automatic_dynamic_shapes": torch._dynamo.config.automatic_dynamic_shapes,
        "devices": sorted({str(p.device) for p in model.parameters()}),
        "from_pretrained_patched": hasattr(PreTrainedModel.from_pretrained, "__neuroncompat__"),
        "torch_compile_is_torch": torch.compile.__module__ == "torch",
        "neuroncompat_info_logs": info_lines,
        "states": sorted({s.state for s in neuroncompat.status().values()}),
    }))
    """.replace("MODEL_PATH", repr(str(tiny_qwen)))
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert _last_json(result.stdout) == {
        "torch_imported_by_shim": False,
        "env_changed": [],
        "automatic_dynamic_shapes": True,
        "devices": ["cpu"],
        "from_pretrained_patched": False,
        "torch_compile_is_torch": True,
        "neuroncompat_info_logs": [],
        "states": ["inactive"],
    }


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
def test_doctor_lists_every_patch() -> None:
    from neuroncompat.shim import patch_ids

    result = run_python("from neuroncompat.cli import main; main(['doctor'])", env=SIMULATE)
    assert result.returncode == 0, result.stderr
    assert "Neuron: yes (neuroncompat.simulator is enabled)" in result.stdout
    assert "visible NeuronCores: 2" in result.stdout
    for pid in patch_ids():
        assert any(line.split()[:2] == [pid, "applies"] for line in result.stdout.splitlines()), (pid, result.stdout)


def test_the_device_alone_leaves_a_shim_imported_before_it_inactive() -> None:
    """`simulator.enable(shim=False)`: the device without the patches, in a process that imported neuroncompat
    (the benches of the device's own step and op coverage); a later `apply()` still starts them."""
    code = """
    import neuroncompat
    from neuroncompat import shim, simulator
    simulator.enable(cores=1, shim=False)
    import torch
    print("ALONE", torch.neuron.is_available(), shim.is_active())
    neuroncompat.apply()
    print("APPLIED", shim.is_active())
    """
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert "ALONE True False" in result.stdout.splitlines()
    assert "APPLIED True" in result.stdout.splitlines()


@pytest.mark.slow  # a fresh interpreter loading a model, about 10 s
def test_shim_imported_before_the_simulator_starts_when_the_device_appears(tiny_qwen: Path) -> None:
    """`import neuroncompat` first, `simulator.enable()` after (a notebook's order): the patches start then,
    keeping what `apply(skip=...)` was told, with no second `apply()`."""
    code = f"""
    import json
    import neuroncompat
    neuroncompat.apply(skip=["async_load"])
    before = {{s.state for s in neuroncompat.status().values()}}
    from neuroncompat import simulator
    simulator.enable()
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained({str(tiny_qwen)!r}, device_map="auto")
    status = neuroncompat.status()
    print(json.dumps({{"before": sorted(before), "device": str(model.device),
                      "async_load": status["async_load"].state, "device_map": status["device_map"].state}}))
    """
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert _last_json(result.stdout) == {
        "before": ["inactive"],
        "device": "neuron:0",
        "async_load": "disabled",
        "device_map": "applied",
    }
