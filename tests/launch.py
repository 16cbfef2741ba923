"""Launch scripts as users do on a trn2 host (torchrun, accelerate launch), on the simulator."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

# Wraps a script: records every DDP/FSDP-wrapped model, and at exit prints one line per rank
# with the device its parameters live on and a digest of their exact bytes. Equal digests on
# all ranks after training mean the gradients really were reduced across ranks.
WEIGHTS_PROBE = """
import atexit, hashlib, json, os, sys
import torch
from torch.nn.parallel import DistributedDataParallel
from neuroncompat.runner import run

_models = []
_init = DistributedDataParallel.__init__


def _record(self, module, *args, **kwargs):
    _init(self, module, *args, **kwargs)
    _models.append(module)


def _report():
    for module in _models:
        digest = hashlib.sha256()
        for p in module.parameters():
            digest.update(p.detach().cpu().float().numpy().tobytes())
        device = str(next(module.parameters()).device)
        print("RANK_WEIGHTS " + json.dumps({"rank": int(os.environ["RANK"]), "device": device, "digest": digest.hexdigest()}))


DistributedDataParallel.__init__ = _record
atexit.register(_report)
run(sys.argv[1:])
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def simulated_env(**extra: str) -> dict[str, str]:
    """The caller's environment with the simulator on, offline, and no stale rank variables.

    ``simulated_env(NEURONCOMPAT_SIMULATE="0")`` is the same for a plain CPU run.
    """
    drop = ("NEURONCOMPAT_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_", "ACCELERATE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        NEURONCOMPAT_SIMULATE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", TOKENIZERS_PARALLELISM="false"
    )
    env.update(extra)
    return env


def torchrun(
    script: Path | str, args: list[str], cwd: Path, nproc: int = 2, module: bool = False
) -> subprocess.CompletedProcess[str]:
    """``torchrun --nproc_per_node=N [-m] script args`` with the simulator; fails loudly."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        str(nproc),
        "--master_port",
        str(free_port()),
        *(["-m"] if module else []),
        str(script),
        *args,
    ]
    return _checked(command, cwd)


def accelerate_launch(
    script: Path | str, args: list[str], cwd: Path, nproc: int = 2
) -> subprocess.CompletedProcess[str]:
    """``accelerate launch --num_processes N script args`` with the simulator; fails loudly.

    The launcher itself runs under ``python -m neuroncompat``: accelerate decides to start one
    process per core only when it sees a Neuron device with several cores (on a trn2 host,
    torch-neuronx loads with torch; here the simulator must be on in the launcher too).
    Otherwise it silently runs a single process.
    """
    command = [
        sys.executable,
        "-m",
        "neuroncompat",
        "-m",
        "accelerate.commands.launch",
        "--num_processes",
        str(nproc),
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
        str(script),
        *args,
    ]
    return _checked(command, cwd)


def _checked(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, env=simulated_env(), cwd=cwd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout[-4000:]}\n{result.stderr[-8000:]}"
    return result
