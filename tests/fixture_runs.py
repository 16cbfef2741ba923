"""Running fixture scripts the way a user would, for the end-to-end tests of migrated fixtures.

An original runs with plain ``python`` on CPU; a migration runs as a user would dry-run it
before renting a trn2: the shim and the simulator on (``NEURONCOMPAT_SIMULATE=1``, as
``python -m neuroncompat`` does), with a probe that prints the peak ``neuron`` memory at exit,
so a migration that quietly ran on CPU fails.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import torch
from launch import simulated_env

from neuroncompat.testing import build_causal_lm, fit_causal_lm, sentences

# ``python -m neuroncompat SCRIPT`` plus a report of the neuron memory the script held.
PROBE = """
import atexit, sys
import torch
from neuroncompat.runner import run
atexit.register(lambda: print("NEURON_PEAK_BYTES", torch.neuron.max_memory_allocated(0)))
run(sys.argv[1:])
"""


def build_workdir(root: Path) -> Path:
    """A tiny Llama (``root/model``) that has memorised ``train.txt``/``train.jsonl``, and that data.

    Memorised, so greedy tokens are the same in fp32 on CPU and bf16 on the simulator.
    """
    lines = sentences(32, min_words=6, max_words=20)
    fit_causal_lm(build_causal_lm(root / "model", arch="llama"), lines)
    (root / "train.txt").write_text("\n".join(lines) + "\n")
    (root / "train.jsonl").write_text("".join(json.dumps({"text": line}) + "\n" for line in lines))
    return root


def run_script(script: Path, args: list[str], workdir: Path, on_neuron: bool) -> str:
    """Run `script` in `workdir` (on CPU, or with the shim on the simulator); return its stdout."""
    env = simulated_env(NEURONCOMPAT_SIMULATE="1" if on_neuron else "0")
    if on_neuron:
        command = [sys.executable, "-c", PROBE, str(script), *args]
    else:
        command = [sys.executable, str(script), *args]
    result = subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{script.name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    if on_neuron:
        peak = re.search(r"NEURON_PEAK_BYTES (\d+)", result.stdout)
        assert peak and int(peak.group(1)) > 0, f"the migration did not run on neuron:\n{result.stdout[-2000:]}"
    return result.stdout


def losses(stdout: str) -> list[float]:
    """Loss values a script printed: ``step N loss X``, ``train loss X`` or the Trainer's log dicts."""
    found = re.findall(r"(?:\bloss\b['\"]?:?\s*['\"]?)(-?\d+\.\d+|nan|inf)", stdout)
    return [float(value) for value in found]


def assert_trained_on_cpu(checkpoint: Path, start: Path) -> None:
    """The checkpoint loads on CPU, holds finite weights, and training changed them."""
    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(checkpoint)
    initial = AutoModelForCausalLM.from_pretrained(start)
    params = dict(trained.named_parameters())
    assert all(p.device.type == "cpu" and torch.isfinite(p).all() for p in params.values())
    assert any(not torch.equal(p, params[name]) for name, p in initial.named_parameters()), "no weight changed"


def assert_adapter_trained_on_cpu(adapter: Path, base: Path) -> None:
    """A LoRA adapter loads onto the CPU base model and its B matrices moved off their zero start."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), adapter)
    lora = {name: p for name, p in model.named_parameters() if "lora_B" in name}
    assert lora and all(p.device.type == "cpu" for p in lora.values())
    assert any(p.abs().sum() > 0 for p in lora.values()), "LoRA B starts at zero; two steps must move it"
