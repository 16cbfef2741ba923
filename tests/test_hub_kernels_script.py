"""A CUDA script using Hub kernels (``get_kernel`` and ``use_kernels=True``) on the simulated device.

``fixtures/cuda/hub_kernels_generate.py`` fetches ``kernels-community/activation`` (falling back to the
PyTorch reference when no build matches, as scripts do) and loads its model with ``use_kernels=True``.
Offline, the activation repo is a stand-in built here with only a CUDA build, filed in the hub cache.
Unmodified, under the shim with the CUDA redirect, it runs on the NeuronCore: ``get_kernel`` fails at
the call with the Neuron error (a ``FileNotFoundError``, so the script's fallback runs) and
``use_kernels`` is dropped with its line instead of failing after loading. Its migration carries the
NM928 TODO and runs on the simulator too; both give the CPU's bf16 greedy tokens.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_runs import PROBE
from launch import simulated_env

from migrate.markers import TODO_PREFIX
from neuroncompat.testing import build_kernel_repo, cache_kernel

pytest.importorskip("kernels")
pytestmark = pytest.mark.slow  # two fresh interpreters generating with the tiny model

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "hub_kernels_generate"
CUDA_ONLY = {"torch29-cxx11-cu128-x86_64-linux": {"__init__.py": "raise ImportError('a CUDA extension')\n"}}


def _run(script: Path, args: list[str], workdir: Path, hf_home: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = simulated_env(HF_HOME=str(hf_home), **extra)
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(script), *args],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"{script.name}\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    peak = [line for line in result.stdout.splitlines() if line.startswith("NEURON_PEAK_BYTES")]
    assert peak and int(peak[-1].split()[1]) > 0, f"{script.name} did not compute on neuron"
    return result


def _cpu_bf16_tokens(model_dir: Path, prompt: str, new_tokens: int) -> list[int]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).eval()
    inputs = tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=new_tokens, do_sample=False)
    return output[0, inputs["input_ids"].shape[1] :].tolist()


def test_the_cuda_script_and_its_migration_run_on_the_simulator(run_workdir: Path, tmp_path: Path) -> None:
    hf_home = tmp_path / "hf"
    cache_kernel(hf_home, "kernels-community/activation", build_kernel_repo(tmp_path / "act", "activation", CUDA_ONLY))
    prompt = " ".join((run_workdir / "train.txt").read_text().split()[:5])
    expected = _cpu_bf16_tokens(run_workdir / "model", prompt, 8)

    def args(side: str) -> list[str]:
        return [
            "--model_name_or_path",
            "model",
            "--prompt",
            prompt,
            "--max_new_tokens",
            "8",
            "--output_file",
            str(tmp_path / side),
        ]

    original = _run(
        FIXTURE.with_suffix(".py"),
        args("cuda.json"),
        run_workdir,
        hf_home,
        NEURONCOMPAT_CUDA="redirect",
        NEURONCOMPAT_CUDA_LOG=str(tmp_path / "log"),
    )
    migrated_path = FIXTURE.with_suffix(".expected.py")
    migrated = _run(migrated_path, args("neuron.json"), run_workdir, hf_home)
    for run in (original, migrated):
        assert (
            'no activation kernel for this machine: get_kernel("kernels-community/activation") on Neuron: the repo has no Neuron build'
            in run.stdout
        )
        assert "silu_and_mul: (4, 32) torch.bfloat16" in run.stdout
        # use_kernels=True loaded the model: without the patch transformers raises after the weights load
        assert "Kernels are not available" not in run.stderr
        assert "[kernels] use_kernels dropped: no Neuron kernels are mapped" in run.stderr
    for side in ("cuda.json", "neuron.json"):
        assert json.loads((tmp_path / side).read_text()) == expected
    todo = f"{TODO_PREFIX}NM928): kernels-community/activation has no Neuron build"
    lines = migrated_path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(todo))
    assert lines[at + 1].strip() == 'activation = get_kernel("kernels-community/activation", version=1)'
