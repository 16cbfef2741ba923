"""Port a CUDA fine-tuning script to TorchNeuron and dry-run it on the simulated Neuron device.

What a newcomer runs first (see the README): no Trainium, no hub access needed.
1. builds a small local model (same code paths as a real one, seconds to train),
2. shows the ``neuron-migrate`` diff of ``examples/finetune_cuda.py`` and applies it to a copy,
3. dry-runs the migrated script with ``neuroncompat simulate``: the shim on the simulated
   ``neuron`` device, then a report of the graphs Neuron would compile (about a minute each on
   hardware) and where each new shape came from.

Everything runs inside one temporary folder, removed at the end, with paths relative to it, so
nothing printed points at a folder that no longer exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

HERE = Path(__file__).resolve().parent


def _banner(text: str) -> None:
    print(f"\n=== {text} ===", flush=True)


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="neuroncompat-quickstart-"))
    try:
        _banner("1. a small local Qwen3 model (model/, in a temporary folder removed at the end)")
        from neuroncompat.testing import build_causal_lm

        build_causal_lm(workdir / "model")

        _banner("2. neuron-migrate examples/finetune_cuda.py (copied to finetune.py)")
        shutil.copy(HERE / "finetune_cuda.py", workdir / "finetune.py")
        migrate = [sys.executable, "-m", "migrate"]
        subprocess.run([*migrate, "finetune.py"], cwd=workdir, check=False)
        subprocess.run([*migrate, "--write", "--quiet", "finetune.py"], cwd=workdir, check=True)

        _banner("3. neuroncompat simulate: the migrated script on the simulated Neuron device")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "neuroncompat.cli",
                "simulate",
                "--",
                "python",
                "finetune.py",
                "--model_name_or_path",
                "model",
                "--output_dir",
                "out",
            ],
            cwd=workdir,
            check=True,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
