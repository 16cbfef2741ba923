"""What a process started on the simulated Neuron device costs before the script's first line runs.

A dry run (``neuroncompat simulate``), a ``torchrun`` of two ranks and most of the suite start fresh interpreters
with ``NEURONCOMPAT_SIMULATE=1``, where ``import torch`` turns the device on (the autoload): each one pays this.
Until issue 43 the start imported Dynamo (the ``neuron`` compile backend, the varlen and flex attention modules,
the dry run's recorder), about 1.5 s of CPU, twice over with the shim, in processes that mostly never compile.

How: the commands below run in turns (``--runs`` each, default 7) in fresh interpreters; the figure is the
child's CPU time (user + system, from ``getrusage``), which other load on a shared machine changes far less than
wall time; the median and the minimum are printed, with the machine's load average.

Run: ``python bench/bench_process_start.py [--runs 7] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

COMMANDS: dict[str, tuple[dict[str, str], str]] = {
    "import torch (no device)": ({}, "import torch"),
    "import torch, simulated device on": (
        {"NEURONCOMPAT_SIMULATE": "1"},
        "import torch; torch.zeros(1, device='neuron')",
    ),
    "import transformers (no device)": (
        {},
        "import torch, transformers; from transformers import AutoModelForCausalLM",
    ),
    "shim + simulated device + transformers": (
        {"NEURONCOMPAT_SIMULATE": "1"},
        "import neuroncompat, torch, transformers; from transformers import AutoModelForCausalLM; "
        "torch.zeros(1, device='neuron')",
    ),
    "the same, recording for neuroncompat simulate": (
        {"NEURONCOMPAT_SIMULATE": "1", "NEURONCOMPAT_SIMULATE_RECORD": "{record}"},
        "import neuroncompat, torch, transformers; from transformers import AutoModelForCausalLM; "
        "torch.zeros(1, device='neuron')",
    ),
}


def _cpu_seconds(env: dict[str, str], code: str, record: str) -> float:
    """CPU seconds of one fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONCOMPAT_")}
    child_env.update({k: v.format(record=record) for k, v in env.items()}, HF_HUB_OFFLINE="1")
    subprocess.run([sys.executable, "-c", code], env=child_env, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as record:
        for env, code in COMMANDS.values():  # one untimed run each: the simulator's C++ build and .pyc files
            _cpu_seconds(env, code, record)
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(args.runs):
            for name, (env, code) in COMMANDS.items():
                times[name].append(_cpu_seconds(env, code, record))
    rows = {
        name: {"median_cpu_s": round(statistics.median(values), 2), "min_cpu_s": round(min(values), 2)}
        for name, values in times.items()
    }
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"runs": args.runs, "load_average": load, "rows": rows}, indent=2))
        return
    print(f"{args.runs} runs each, interleaved; load average {load:.1f}; CPU seconds per process")
    for name, row in rows.items():
        print(f"  {name:48s} median {row['median_cpu_s']:5.2f}  min {row['min_cpu_s']:5.2f}")


if __name__ == "__main__":
    main()
