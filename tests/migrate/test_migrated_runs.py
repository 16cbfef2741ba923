"""Migrated CUDA fixtures run on the simulated Neuron device and do what the originals do on CPU.

Each original (``fixtures/cuda/<name>.py``) runs with plain ``python`` on CPU; its reviewed
migration (``<name>.expected.py``) runs as a user would dry-run it before renting a trn2: the
shim and the simulator on (``NEURONCOMPAT_SIMULATE=1``, as ``python -m neuroncompat`` does).
Inference must produce the same greedy tokens as the original; training must log finite losses
and save a checkpoint that loads on CPU and differs from the starting weights. A probe prints the
peak ``neuron`` memory at exit, so a migration that quietly ran on CPU fails.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="runs migrated scripts on the simulator: needs torch")

from fixture_runs import assert_adapter_trained_on_cpu, assert_trained_on_cpu, losses, run_script

pytestmark = pytest.mark.slow  # each test trains or generates with a migrated script in a fresh process

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cuda"


@pytest.fixture(scope="module")
def workdir(run_workdir: Path) -> Path:
    return run_workdir


def _run(script: str, args: list[str], workdir: Path, on_neuron: bool) -> str:
    """Run a fixture: the original on CPU, or its migration on the simulator."""
    path = FIXTURES / (f"{script}.expected.py" if on_neuron else f"{script}.py")
    return run_script(path, args, workdir, on_neuron)


@pytest.mark.parametrize("script, output", [("generate_inference", "ids.txt"), ("pipeline_inference", "text.json")])
def test_inference_gives_the_cpu_tokens(script: str, output: str, workdir: Path) -> None:
    prompt = " ".join((workdir / "train.txt").read_text().split()[:5])

    def args(side: str) -> list[str]:
        return [
            "--model_name_or_path",
            "model",
            "--prompt",
            prompt,
            "--max_new_tokens",
            "8",
            "--output_file",
            f"{side}-{output}",
        ]

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
    stdout = _run(
        script,
        ["--model_name_or_path", "model", "--output_dir", str(out), "--max_steps", "2", *args],
        workdir,
        on_neuron=True,
    )
    found = losses(stdout)
    assert found and all(math.isfinite(loss) for loss in found), stdout[-2000:]
    assert_trained_on_cpu(out, workdir / "model")


def test_sft_lora_saves_an_adapter_that_loads_on_cpu(workdir: Path) -> None:
    out = workdir / "sft-lora-out"
    stdout = _run(
        "sft_lora",
        [
            "--model_name_or_path",
            "model",
            "--dataset_name",
            "train.jsonl",
            "--output_dir",
            str(out),
            "--max_steps",
            "2",
            "--per_device_train_batch_size",
            "2",
            "--max_length",
            "64",
        ],
        workdir,
        on_neuron=True,
    )
    found = losses(stdout)
    assert found and all(math.isfinite(loss) for loss in found), stdout[-2000:]
    assert_adapter_trained_on_cpu(out, workdir / "model")
