"""Launch scripts as users do on a trn2 host (torchrun, accelerate launch), on the simulator."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
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


def run_ranks(
    command: list[str], env: dict[str, str], cwd: Path, timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    """Run a torchrun or ``accelerate launch`` command; its ``stdout`` is the launcher's own
    output followed by each rank's whole stdout, rank by rank, never interleaved.

    Ranks that share the launcher's stdout pipe interleave their writes: a line of one rank can
    land inside a line of the other (Python block-buffers a pipe and flushes at 8 KiB, not at a
    newline). torchrun's own per-rank log files (``--log-dir`` with ``--redirects 1``, read from
    ``PET_LOG_DIR``/``PET_REDIRECTS``; accelerate's launcher parses with torchrun's parser but passes
    its own ``--log_dir``) keep each rank's output whole; tests read those.
    """
    with tempfile.TemporaryDirectory(prefix="ranks-") as logs:
        if "accelerate.commands.launch" in command:  # its own --log_dir (default None) overrides PET_LOG_DIR
            at = command.index("accelerate.commands.launch") + 1
            command = [*command[:at], "--log_dir", logs, *command[at:]]
        result = subprocess.run(
            command,
            env={**env, "PET_LOG_DIR": logs, "PET_REDIRECTS": "1"},
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        result.stdout += "".join(path.read_text(errors="replace") for path in rank_logs(Path(logs)))
    return result


def rank_logs(root: Path) -> list[Path]:
    """Every rank's ``stdout.log`` under a torchrun log directory, in (attempt, local rank) order.

    torchrun writes ``<log-dir>/<run id>/attempt_<n>/<local rank>/stdout.log``."""
    logs = root.glob("*/attempt_*/*/stdout.log")
    return sorted(logs, key=lambda p: (p.parent.parent.name, int(p.parent.name)))


def _checked(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = run_ranks(command, simulated_env(), cwd)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout[-4000:]}\n{result.stderr[-8000:]}"
    return result
