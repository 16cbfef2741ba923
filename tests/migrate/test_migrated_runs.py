"""Migrated CUDA fixtures run on the simulated Neuron device and do what the originals do on CPU.

Each original (``fixtures/cuda/<name>.py``) runs with plain ``python`` on CPU; its reviewed
migration (``<name>.expected.py``) runs as a user would dry-run it before renting a trn2: the
shim and the simulator on (``NEURONCOMPAT_SIMULATE=1``, as ``python -m neuroncompat`` does).
Inference must produce the same greedy tokens as the original; training must log finite losses
and save a checkpoint that loads on CPU and differs from the starting weights. A probe prints the
peak ``neuron`` memory at exit, so a migration that quietly ran on CPU fails.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from neuroncompat.testing import build_causal_lm, fit_causal_lm, sentences

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cuda"

# ``python -m neuroncompat SCRIPT`` plus a report of the neuron memory the script held.
PROBE = """
import atexit, sys
import torch
from neuroncompat.runner import run
atexit.register(lambda: print("NEURON_PEAK_BYTES", torch.neuron.max_memory_allocated(0)))
run(sys.argv[1:])
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama that has memorised the fixtures' training data, and that data.

    Memorised, so greedy tokens are the same in the original's fp32 and the migration's bf16.
    """
    root = tmp_path_factory.mktemp("runs")
    lines = sentences(32, min_words=6, max_words=20)
    fit_causal_lm(build_causal_lm(root / "model", arch="llama"), lines)
    (root / "train.txt").write_text("\n".join(lines) + "\n")
    (root / "train.jsonl").write_text("".join(json.dumps({"text": line}) + "\n" for line in lines))
    return root


def _run(script: str, args: list[str], workdir: Path, on_neuron: bool) -> str:
    """Run a fixture (original on CPU, or migration on the simulator); return its stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONCOMPAT_") and k != "LOCAL_RANK"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", TOKENIZERS_PARALLELISM="false")
    if on_neuron:
        env["NEURONCOMPAT_SIMULATE"] = "1"
        command = [sys.executable, "-c", PROBE, str(FIXTURES / f"{script}.expected.py"), *args]
    else:
        command = [sys.executable, str(FIXTURES / f"{script}.py"), *args]
    result = subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{command[-len(args) - 1]} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    if on_neuron:
        peak = re.search(r"NEURON_PEAK_BYTES (\d+)", result.stdout)
        assert peak and int(peak.group(1)) > 0, f"the migration did not run on neuron:\n{result.stdout[-2000:]}"
    return result.stdout


def _losses(stdout: str) -> list[float]:
    """Loss values a script printed: ``step N loss X``, ``train loss X`` or the Trainer's log dicts."""
    found = re.findall(r"(?:\bloss\b['\"]?:?\s*['\"]?)(-?\d+\.\d+|nan|inf)", stdout)
    return [float(value) for value in found]


def _trained_on_cpu(checkpoint: Path, start: Path) -> None:
    """The checkpoint loads on CPU, holds finite weights, and training changed them."""
    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(checkpoint)
    initial = AutoModelForCausalLM.from_pretrained(start)
    params = dict(trained.named_parameters())
    assert all(p.device.type == "cpu" and torch.isfinite(p).all() for p in params.values())
    assert any(not torch.equal(p, params[name]) for name, p in initial.named_parameters()), "no weight changed"


@pytest.mark.parametrize("script, output", [("generate_inference", "ids.txt"), ("pipeline_inference", "text.json")])
def test_inference_gives_the_cpu_tokens(script: str, output: str, workdir: Path) -> None:
    prompt = " ".join((workdir / "train.txt").read_text().split()[:5])

    def args(side: str) -> list[str]:
        return ["--model_name_or_path", "model", "--prompt", prompt,
                "--max_new_tokens", "8", "--output_file", f"{side}-{output}"]

    _run(script, args("cpu"), workdir, on_neuron=False)
    _run(script, args("neuron"), workdir, on_neuron=True)
    cpu, neuron = ((workdir / f"{side}-{output}").read_text() for side in ("cpu", "neuron"))
    assert cpu.strip() and neuron == cpu


@pytest.mark.parametrize(
    "script, args",
    [
        ("trainer_clm", ["--train_file", "train.txt", "--per_device_train_batch_size", "2", "--block_size", "32"]),
        ("ddp_train_loop", ["--train_file", "train.txt", "--batch_size", "2", "--block_size", "16"]),
    ],
)
def test_full_training_saves_a_cpu_loadable_checkpoint(script: str, args: list[str], workdir: Path) -> None:
    out = workdir / f"{script}-out"
    stdout = _run(script, ["--model_name_or_path", "model", "--output_dir", str(out), "--max_steps", "2", *args], workdir, on_neuron=True)
    losses = _losses(stdout)
    assert losses and all(math.isfinite(loss) for loss in losses), stdout[-2000:]
    _trained_on_cpu(out, workdir / "model")


def test_sft_lora_saves_an_adapter_that_loads_on_cpu(workdir: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    out = workdir / "sft-lora-out"
    stdout = _run(
        "sft_lora",
        ["--model_name_or_path", "model", "--dataset_name", "train.jsonl", "--output_dir", str(out), "--max_steps", "2",
         "--per_device_train_batch_size", "2", "--max_length", "64"],
        workdir,
        on_neuron=True,
    )
    losses = _losses(stdout)
    assert losses and all(math.isfinite(loss) for loss in losses), stdout[-2000:]
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(workdir / "model"), out)
    lora = {name: p for name, p in model.named_parameters() if "lora_B" in name}
    assert lora and all(p.device.type == "cpu" for p in lora.values())
    assert any(p.abs().sum() > 0 for p in lora.values()), "LoRA B starts at zero; two steps must move it"
