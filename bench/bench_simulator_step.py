"""Cost of one training step on the simulated ``neuron`` device, against the same step on plain CPU.

Measured: one step of a causal LM (``neuroncompat.testing.build_causal_lm``, qwen3) on a fixed
batch (4 x 64 token ids, labels = inputs): forward, backward, ``torch.optim.AdamW.step()``,
``zero_grad`` and ``loss.item()``, with bf16 autocast off and on: four rows by default, the tiny
model (the test suite's: 2 layers, hidden 64, per-op overhead dominates) and the large one (12
layers of hidden 512: kernel time dominates); ``--size`` picks one. Under bf16 autocast each
device applies its own policy (the CPU's, and on ``neuron`` CUDA's: docs/simulator.md), so that
row's two steps run some ops in different dtypes. The simulated device runs every op with the CPU's kernel on
the same memory (the C++ backend's boxed fallback), so the ratio simulator/CPU is the price of
the dispatch to that fallback (device checks, host aliases, the op observer) and of its
allocator.

How: both models of a size load the same checkpoint. Every (size, autocast, device) step is
warmed up (``--warmup`` steps, excluded), then all take their timed steps in turn, round after
round (tiny CPU, tiny neuron, ..., large CPU, large neuron), so load from other processes on a
shared machine hits every row alike; the figure is the median of ``--steps`` steps.
Each step is timed twice: wall clock, and the process's CPU time (``time.process_time``, every
thread's), which other processes' load disturbs far less than the wall clock; on a loaded machine
read the CPU-time ratio, with ``--threads 1`` to keep intra-op threads from spinning.
AdamW keeps its defaults, as the Trainer does; the table says which implementation PyTorch picked
(``foreach`` on the CPU goes to the single-tensor loop; on the device it is ``foreach``, whose
``_foreach_*`` ops run the CPU's kernels one call per list, so a large model's step can be faster
on the simulated device). ``--for-loop-adamw`` gives both the single-tensor loop, isolating the
cost of the device's dispatch.

Enabling the simulator does not put the CPU model on the device: the script checks that its
parameters and optimizer state stay on CPU.

Run: ``python bench/bench_simulator_step.py [--size tiny|large|both] [--steps 20] [--warmup 3] [--threads N] [--for-loop-adamw] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ.pop("NEURONCOMPAT_SIMULATE", None)  # this script decides when the device exists

import torch

BATCH = 4
SEQ = 64


SIZES = {"tiny": (2, 64), "large": (12, 512)}  # (layers, hidden)


@dataclass(frozen=True)
class Row:
    """One line of the table: both devices at one size and autocast setting."""

    size: str
    autocast_bf16: bool
    cpu_ms: float
    neuron_ms: float
    ratio: float
    cpu_cpu_ms: float
    neuron_cpu_ms: float
    cpu_time_ratio: float
    cpu_optimizer: str
    neuron_optimizer: str


def build_model_dir(root: str, size: str) -> Path:
    """The qwen3 checkpoint both devices load, so they start from identical weights."""
    from neuroncompat.testing import build_causal_lm

    layers, hidden = SIZES[size]
    return build_causal_lm(root, arch="qwen3", layers=layers, hidden=hidden)


def make_step(
    model_dir: Path, device: str, bf16: bool, foreach: bool | None
) -> tuple[Callable[[], float], torch.nn.Module, torch.optim.Optimizer]:
    """A closure running one full training step on ``device``; returns the loss as a float."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=foreach)
    ids = torch.randint(0, model.config.vocab_size, (BATCH, SEQ), generator=torch.Generator().manual_seed(0)).to(device)
    device_type = torch.device(device).type

    def step() -> float:
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    return step, model, optimizer


def optimizer_impl(optimizer: torch.optim.Optimizer) -> str:
    """Which AdamW implementation PyTorch's defaults pick for these parameters (it varies by device and tensor type)."""
    from torch.optim.optimizer import _default_to_fused_or_foreach

    if optimizer.defaults["foreach"] is not None:
        return "foreach" if optimizer.defaults["foreach"] else "for-loop"
    params = [p for group in optimizer.param_groups for p in group["params"]]
    _, foreach = _default_to_fused_or_foreach(params, differentiable=False, use_fused=False)
    return "foreach" if foreach else "for-loop"


def assert_on_cpu(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """The CPU baseline must not have touched the simulated device."""
    tensors = list(model.parameters()) + [
        t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)
    ]
    devices = {t.device.type for t in tensors}
    if devices != {"cpu"}:
        raise AssertionError(f"CPU baseline touched {devices - {'cpu'}}")


def measure(
    model_dirs: dict[str, Path], settings: list[tuple[str, bool]], steps: int, warmup: int, foreach: bool | None
) -> list[Row]:
    """Warm every (size, autocast) setting up on both devices, then time them all in turn each
    round; one row per setting, medians in milliseconds."""
    runs = {
        (size, bf16, device): make_step(model_dirs[size], device, bf16, foreach)
        for size, bf16 in settings
        for device in ("cpu", "neuron")
    }
    for _ in range(warmup):
        for step, _, _ in runs.values():
            step()
    wall: dict[tuple[str, bool, str], list[float]] = {key: [] for key in runs}
    busy: dict[tuple[str, bool, str], list[float]] = {key: [] for key in runs}
    for _ in range(steps):
        for key, (step, _, _) in runs.items():
            start, start_busy = time.perf_counter(), time.process_time()
            step()
            wall[key].append(time.perf_counter() - start)
            busy[key].append(time.process_time() - start_busy)
    rows = []
    for size, bf16 in settings:
        cpu, neuron = (size, bf16, "cpu"), (size, bf16, "neuron")
        assert_on_cpu(runs[cpu][1], runs[cpu][2])
        cpu_ms, neuron_ms = (statistics.median(wall[key]) * 1e3 for key in (cpu, neuron))
        cpu_busy, neuron_busy = (statistics.median(busy[key]) * 1e3 for key in (cpu, neuron))
        rows.append(
            Row(
                size,
                bf16,
                round(cpu_ms, 2),
                round(neuron_ms, 2),
                round(neuron_ms / cpu_ms, 2),
                round(cpu_busy, 2),
                round(neuron_busy, 2),
                round(neuron_busy / cpu_busy, 2),
                optimizer_impl(runs[cpu][2]),
                optimizer_impl(runs[neuron][2]),
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size", choices=[*sorted(SIZES), "both"], default="both", help="model size (see the docstring)"
    )
    parser.add_argument("--steps", type=int, default=20, help="timed steps per device and setting (median reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument(
        "--for-loop-adamw",
        action="store_true",
        help="AdamW(foreach=False) on both devices, so the ratio is the dispatch cost alone",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from neuroncompat import simulator

    simulator.enable(cores=2, shim=False)  # the device alone, as the CPU side has no patches
    sizes = list(SIZES) if args.size == "both" else [args.size]
    with tempfile.TemporaryDirectory() as root:
        model_dirs = {size: build_model_dir(str(Path(root) / size), size) for size in sizes}
        foreach = False if args.for_loop_adamw else None
        settings = [(size, bf16) for size in sizes for bf16 in (False, True)]
        rows = measure(model_dirs, settings, args.steps, args.warmup, foreach)

    meta = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "steps": args.steps,
        "warmup": args.warmup,
        "batch": [BATCH, SEQ],
        "sizes": {size: list(SIZES[size]) for size in sizes},
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=2))
        return
    models = ", ".join(f"{size} ({SIZES[size][0]} layers, hidden {SIZES[size][1]})" for size in sizes)
    print(
        f"qwen3 {models}, batch {BATCH}x{SEQ}, median of {args.steps} "
        f"steps after {args.warmup} warmup, torch {meta['torch']}, {meta['threads']} threads, "
        f"load average {meta['loadavg_1min']} at the end"
    )
    print(
        f"{'size':<7}{'autocast':<10}{'cpu ms':>10}{'neuron ms':>12}{'sim/cpu':>9}"
        f"{'cpu-time cpu':>14}{'neuron':>9}{'sim/cpu':>9}   AdamW cpu / neuron"
    )
    for r in rows:
        label = "bf16" if r.autocast_bf16 else "off"
        print(
            f"{r.size:<7}{label:<10}{r.cpu_ms:>10.2f}{r.neuron_ms:>12.2f}{r.ratio:>8.2f}x"
            f"{r.cpu_cpu_ms:>14.2f}{r.neuron_cpu_ms:>9.2f}{r.cpu_time_ratio:>8.2f}x"
            f"   {r.cpu_optimizer} / {r.neuron_optimizer}"
        )


if __name__ == "__main__":
    main()
