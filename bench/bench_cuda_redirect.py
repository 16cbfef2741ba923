"""What ``NEURONCOMPAT_CUDA=redirect`` costs: a training step as written for CUDA under the
redirect vs the same step as ``neuron-migrate`` writes it, the per-call cost of the wrapped
entry points, and the cost of turning the redirect on.

Step (goal: ratio <= 1.02). One process, simulator on (2 cores), the tiny qwen3 model of
``bench_simulator_step.py`` (2 layers, hidden 64, batch 4 x 64) on ``neuron:0``. The *CUDA*
step is written as a CUDA script would be: ``batch.to("cuda")``, ``torch.autocast("cuda",
dtype=torch.float16)``, ``torch.cuda.amp.GradScaler`` (made once, as scripts do),
``torch.cuda.synchronize()``; it runs with the redirect on. The *migrated* step is what
``neuron-migrate`` makes of it (``.to("neuron:0")``, ``torch.autocast("neuron",
dtype=torch.bfloat16)``, ``torch.amp.GradScaler("neuron", enabled=False)``,
``torch.neuron.synchronize()``) and runs with the redirect off. Both use one model and optimizer;
after ``--warmup`` steps they alternate in ABBA blocks of ``--block`` steps, and the figures are
median step times.

Per call: ``timeit`` of the wrapped entry points with the redirect off and on, on CPU tensors
(what a hot loop pays on hardware, where ops are fast): ``x.to(torch.float32)`` (no CUDA name:
two type checks), ``torch.zeros(4, device=d)`` with a neuron device, ``x.to("cuda")`` on a
neuron tensor (translation, caller frame and log), and ``torch.cuda.current_device()``.

Turning it on: ``from neuroncompat import cuda; cuda.redirect()`` with torch, transformers and
the simulator already imported (what ``import neuroncompat`` adds under
``NEURONCOMPAT_CUDA=redirect``), in a fresh process, best of 3.

Run: ``python bench/bench_cuda_redirect.py [--steps 20] [--block 2] [--warmup 3] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ.pop("NEURONCOMPAT_SIMULATE", None)
os.environ.pop("NEURONCOMPAT_CUDA", None)

import torch
from bench_simulator_step import BATCH, SEQ, build_model_dir

import neuroncompat  # noqa: F401
from neuroncompat import cuda, simulator

IMPORT_PROBE = """
import time, neuroncompat
from neuroncompat import simulator
simulator.enable(cores=2)
import torch, transformers
start = time.perf_counter()
from neuroncompat import cuda
cuda.redirect()
print((time.perf_counter() - start) * 1e3)
"""


def make_steps(model_dir: Path) -> dict[str, Callable[[], float]]:
    """The CUDA-as-written step and the migrated step, sharing one model and optimizer."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir).to("neuron:0")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    generator = torch.Generator().manual_seed(0)
    batch = torch.randint(0, model.config.vocab_size, (BATCH, SEQ), generator=generator)
    scalers: dict[str, object] = {}

    def cuda_step() -> float:
        scaler = scalers.get("cuda")
        if scaler is None:
            scaler = scalers["cuda"] = torch.cuda.amp.GradScaler()
        ids = batch.to("cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(input_ids=ids, labels=ids).loss
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        return loss.item()

    def migrated_step() -> float:
        scaler = scalers.get("neuron")
        if scaler is None:
            scaler = scalers["neuron"] = torch.amp.GradScaler("neuron", enabled=False)
        ids = batch.to("neuron:0")
        with torch.autocast("neuron", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        torch.neuron.synchronize()
        return loss.item()

    return {"redirect": cuda_step, "migrated": migrated_step}


def set_redirect(on: bool) -> None:
    if on:
        cuda.redirect()
    else:
        cuda.undo()
    if cuda.is_redirected() != on:
        raise AssertionError(f"redirect on={cuda.is_redirected()}, wanted {on}")


def timed_blocks(steps: dict[str, Callable[[], float]], count: int, block: int) -> dict[str, list[float]]:
    """ABBA: migrated, redirect, redirect, migrated, ... in blocks of ``block`` steps."""
    times: dict[str, list[float]] = {"migrated": [], "redirect": []}
    order = ["migrated", "redirect", "redirect", "migrated"]
    i = 0
    while min(len(t) for t in times.values()) < count:
        name = order[i % 4]
        i += 1
        set_redirect(name == "redirect")
        for _ in range(block):
            start = time.perf_counter()
            steps[name]()
            times[name].append(time.perf_counter() - start)
    set_redirect(False)
    return {k: v[:count] for k, v in times.items()}


def per_call_ns() -> dict[str, dict[str, float]]:
    """ns per call of the wrapped entry points, redirect off vs on (best of 5 x 2000 calls)."""
    x = torch.ones(4)
    on_device = torch.ones(4, device="neuron:0")
    neuron = torch.device("neuron", 0)
    cases = {
        "x.to(torch.float32)": lambda: x.to(torch.float32),
        "torch.zeros(4, device=neuron)": lambda: torch.zeros(4, device=neuron),
        'neuron_x.to("cuda")': lambda: on_device.to("cuda"),
        "torch.cuda.current_device()": lambda: torch.cuda.current_device(),
    }
    result: dict[str, dict[str, float]] = {}
    for name, call in cases.items():
        row = {}
        for state in (False, True):
            set_redirect(state)
            try:
                row["on" if state else "off"] = min(timeit.repeat(call, number=2000, repeat=5)) / 2000 * 1e9
            except Exception:  # CUDA names without the redirect fail: there is no "off" figure
                row["on" if state else "off"] = float("nan")
        result[name] = row
    set_redirect(False)
    return result


def redirect_on_ms() -> float:
    """Milliseconds that ``cuda.redirect()`` takes in a fresh process (best of 3)."""
    runs = []
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", IMPORT_PROBE],
            capture_output=True,
            text=True,
            check=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("NEURONCOMPAT_")},
        )
        runs.append(float(out.stdout.split()[-1]))
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per variant (median reported)")
    parser.add_argument("--block", type=int, default=2, help="steps between switching variants")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps of each variant first")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()

    simulator.enable(cores=2)
    with tempfile.TemporaryDirectory() as root:
        steps = make_steps(build_model_dir(root, "tiny"))
        for _ in range(args.warmup):
            set_redirect(True)
            steps["redirect"]()
            set_redirect(False)
            steps["migrated"]()
        times = timed_blocks(steps, args.steps, args.block)
    calls = per_call_ns()
    on_ms = redirect_on_ms()
    migrated_ms = statistics.median(times["migrated"]) * 1e3
    redirect_ms = statistics.median(times["redirect"]) * 1e3
    result = {
        "steps": args.steps,
        "block": args.block,
        "warmup": args.warmup,
        "migrated_ms": round(migrated_ms, 2),
        "redirect_ms": round(redirect_ms, 2),
        "ratio_redirect_migrated": round(redirect_ms / migrated_ms, 3),
        "per_call_ns": {k: {s: round(v, 1) for s, v in row.items()} for k, row in calls.items()},
        "redirect_on_ms": round(on_ms, 1),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"training step on simulated neuron:0, tiny qwen3, batch {BATCH}x{SEQ}, bf16 autocast, "
        f"median of {args.steps} steps per variant, ABBA blocks of {args.block}"
    )
    print(f"{'variant':<34}{'step ms':>10}")
    print(f"{'migrated script, redirect off':<34}{migrated_ms:>10.2f}")
    print(f"{'CUDA script, redirect on':<34}{redirect_ms:>10.2f}")
    print(f"ratio redirect/migrated: {redirect_ms / migrated_ms:.3f}")
    print(f"\n{'call (CPU tensors unless neuron)':<34}{'off ns':>10}{'on ns':>10}")
    for name, row in calls.items():
        print(f"{name:<34}{row['off']:>10.0f}{row['on']:>10.0f}")
    print(f"\ncuda.redirect() with torch, transformers and the simulator loaded: {on_ms:.1f} ms (best of 3)")


if __name__ == "__main__":
    main()
