"""How often a finished 2-rank DDP script fails to exit, or fails, on the simulator under torchrun.

Measured: ``--runs`` launches (default 50) of ``torchrun --nproc_per_node 2 -m neuroncompat
ddp_script.py`` with ``NEURONCOMPAT_SIMULATE=1``. The script (written to a temporary directory)
trains a small MLP with DDP on ``neuron:{LOCAL_RANK}`` for 3 steps, all-reduces a checksum, prints
``DONE`` on each rank and calls ``dist.destroy_process_group()``, as the issue's scripts did. A run
is:

- ``ok``: exit code 0 and both ranks printed ``DONE``;
- ``hang``: both ranks printed ``DONE`` but the launcher had not exited ``--timeout`` seconds
  after it started (the whole process group is then killed);
- ``fail``: any other outcome (non-zero exit, a missing ``DONE``, a hang before ``DONE``).

With ``--py-spy PATH`` a hung run's ranks are dumped with ``py-spy dump --native`` before the
kill, to ``--dump-dir``.

Run it beside other load (the test suite), since the hang it guards against showed under load:
``python bench/bench_distributed_stress.py [--runs 50] [--timeout 120] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DDP_SCRIPT = """
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group(backend="neuron")
rank = dist.get_rank()
torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))
torch.manual_seed(0)
layers = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
model = DistributedDataParallel(layers.to("neuron"))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(rank * 10 + step)).to("neuron")
    model(x).pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()
checksum = sum(p.detach().sum() for p in model.parameters()).reshape(1)
dist.all_reduce(checksum)
print(f"DONE rank={rank} checksum={checksum.item():.6f}", flush=True)
dist.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _environment() -> dict[str, str]:
    drop = ("NEURONCOMPAT_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(NEURONCOMPAT_SIMULATE="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]


def _dump(launcher: int, py_spy: str, dump_dir: Path, run: int) -> None:
    for rank_pid in _children(launcher):
        out = subprocess.run([py_spy, "dump", "--native", "--pid", str(rank_pid)], capture_output=True, text=True)
        (dump_dir / f"run{run}-pid{rank_pid}.txt").write_text(out.stdout + out.stderr)


def run_once(script: Path, timeout: float, py_spy: str | None, dump_dir: Path, run: int) -> tuple[str, float]:
    """One launch; returns its outcome (ok / hang / fail) and wall seconds."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(_free_port()),
        "-m",
        "neuroncompat",
        str(script),
    ]
    start = time.monotonic()
    proc = subprocess.Popen(
        command,
        env=_environment(),
        cwd=script.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
        if py_spy:
            _dump(proc.pid, py_spy, dump_dir, run)
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
    seconds = time.monotonic() - start
    done = output.count("DONE rank=")
    if not timed_out and proc.returncode == 0 and done == 2:
        return "ok", seconds
    if timed_out and done == 2:
        return "hang", seconds
    (dump_dir / f"run{run}-output.txt").write_text(output)
    return "fail", seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run before it counts as hung")
    parser.add_argument("--py-spy", default=None, help="py-spy executable: dump hung ranks before killing them")
    parser.add_argument("--dump-dir", default=None, help="where dumps and failed runs' output go (default: a temp dir)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="ddp-stress-"))
    dump_dir = Path(args.dump_dir) if args.dump_dir else workdir
    dump_dir.mkdir(parents=True, exist_ok=True)
    script = workdir / "ddp_script.py"
    script.write_text(DDP_SCRIPT)
    outcomes: dict[str, int] = {"ok": 0, "hang": 0, "fail": 0}
    seconds: list[float] = []
    for run in range(args.runs):
        outcome, took = run_once(script, args.timeout, args.py_spy, dump_dir, run)
        outcomes[outcome] += 1
        seconds.append(took)
        if not args.json:
            print(f"run {run + 1:3d}/{args.runs}: {outcome:4s} {took:6.1f} s", flush=True)
    load = os.getloadavg()
    summary = {
        "runs": args.runs,
        **outcomes,
        "median_s": sorted(seconds)[len(seconds) // 2],
        "max_s": max(seconds),
        "load_avg_1_5_15": [round(x, 2) for x in load],
        "details": str(dump_dir),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{args.runs} runs: {outcomes['ok']} ok, {outcomes['hang']} hung after finishing, "
            f"{outcomes['fail']} failed; median {summary['median_s']:.1f} s, max {summary['max_s']:.1f} s; "
            f"load average {summary['load_avg_1_5_15']}; details in {dump_dir}"
        )


if __name__ == "__main__":
    main()
