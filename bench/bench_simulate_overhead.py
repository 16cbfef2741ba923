"""What ``neuroncompat simulate``'s recorder costs: the TRL guide's SFT scenario with and without it.

Three runs of the scenario, all on the simulator with the shim, alternating, ``--rounds`` of each
on one tiny qwen3 built once:

- **without recorder**: ``NEURONCOMPAT_SIMULATE=1 python -m neuroncompat -m neuroncompat.simulate.scenarios sft``;
- **recorder**: the same with ``NEURONCOMPAT_SIMULATE_RECORD=<dir>``, the recorder alone: module
  hooks on every forward, the compile listener, Dynamo's graph-break hook, the op observer on every
  device op (data-dependent-shape and CPU-fallback ops) and the node-by-node first run of each
  compiled graph;
- **neuroncompat simulate**: the whole command (``neuroncompat simulate --format json -- python -m
  ...``), which adds its own process and the report.

The figure is CPU time (user + system of the child processes, ``resource.RUSAGE_CHILDREN``): on a
shared machine wall time moves with the other jobs' load, CPU time much less. Wall time is shown
too. The table gives medians and the ratios to the run without the recorder (the budget: 1.3x).

Run: ``python bench/bench_simulate_overhead.py [--rounds 3] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from neuroncompat.testing import build_causal_lm

SCENARIO = ["-m", "neuroncompat.simulate.scenarios"]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run."""
    cpu, start = _cpu(), time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _cpu() - cpu
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", TOKENIZERS_PARALLELISM="false")
    with tempfile.TemporaryDirectory() as scratch:
        model = build_causal_lm(Path(scratch) / "tiny-qwen3")
        arguments = ["--model", str(model), "sft", "--pad-to-multiple-of", "128"]
        plain = [sys.executable, "-m", "neuroncompat", *SCENARIO, *arguments]
        recorded = [
            sys.executable,
            "-c",
            "from neuroncompat.cli import main; main()",
            "simulate",
            "--format",
            "json",
            "-o",
            str(Path(scratch) / "report.json"),
            "--",
            sys.executable,
            *SCENARIO,
            *arguments,
        ]
        runs = {
            "without recorder": (plain, dict(env, NEURONCOMPAT_SIMULATE="1")),
            "recorder": (plain, dict(env, NEURONCOMPAT_SIMULATE="1", NEURONCOMPAT_SIMULATE_RECORD=scratch)),
            "neuroncompat simulate": (recorded, env),
        }
        times: dict[str, list[tuple[float, float]]] = {label: [] for label in runs}
        for _ in range(options.rounds):
            for label, (command, run_env) in runs.items():
                times[label].append(_timed(command, run_env))
    cpu = {label: statistics.median(c for c, _ in values) for label, values in times.items()}
    wall = {label: statistics.median(w for _, w in values) for label, values in times.items()}
    base = cpu["without recorder"]
    if options.json:
        print(
            json.dumps(
                {
                    "runs": times,
                    "median_cpu": cpu,
                    "median_wall": wall,
                    "cpu_ratio": {k: v / base for k, v in cpu.items()},
                },
                indent=2,
            )
        )
        return
    print(f"SFT scenario (tiny qwen3, torch_compile, pad_to_multiple_of=128), {options.rounds} alternating rounds")
    print(f"{'run':<24}{'CPU s':>8}{'ratio':>8}{'wall s':>9}   CPU s of each run")
    for label, values in times.items():
        each = ", ".join(f"{c:.1f}" for c, _ in values)
        print(f"{label:<24}{cpu[label]:8.1f}{cpu[label] / base:7.2f}x{wall[label]:9.1f}   {each}")


if __name__ == "__main__":
    main()
