"""Cost of one training step on the simulated ``neuron`` device, against the same step on plain CPU.

Measured: one step of a causal LM (``neuroncompat.testing.build_causal_lm``, qwen3) on a fixed
batch (4 x 64 token ids, labels = inputs): forward, backward, ``torch.optim.AdamW.step()``,
``zero_grad`` and ``loss.item()``, with bf16 autocast off and on. ``--size tiny`` is the test
suite's model (2 layers, hidden 64: per-op overhead dominates); ``--size large`` has 12 layers of
hidden 512 (kernel time dominates). The simulated device runs every op with the CPU's kernel on
the same memory (the C++ backend's boxed fallback), so the ratio simulator/CPU is the price of
the dispatch to that fallback (device checks, host aliases, the op observer) and of its
allocator.

How: both models load the same checkpoint. Each is warmed up (``--warmup`` steps, excluded),
then the two take their timed steps alternately (CPU, neuron, CPU, ...), so load from other
processes on a shared machine hits both alike; the figure is the median of ``--steps`` steps.
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

Run: ``python bench/bench_simulator_step.py [--size tiny|large] [--steps 20] [--warmup 3] [--threads N] [--for-loop-adamw] [--json]``
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
    """One line of the table: both devices at one autocast setting."""

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


def measure(model_dir: Path, bf16: bool, steps: int, warmup: int, foreach: bool | None) -> Row:
    """Warm both devices up, then time alternating steps; medians in milliseconds."""
    cpu_step, cpu_model, cpu_opt = make_step(model_dir, "cpu", bf16, foreach)
    neuron_step, _, neuron_opt = make_step(model_dir, "neuron", bf16, foreach)
    for _ in range(warmup):
        cpu_step()
        neuron_step()
    wall: dict[str, list[float]] = {"cpu": [], "neuron": []}
    busy: dict[str, list[float]] = {"cpu": [], "neuron": []}
    for _ in range(steps):
        for name, step in (("cpu", cpu_step), ("neuron", neuron_step)):
            start, start_busy = time.perf_counter(), time.process_time()
            step()
            wall[name].append(time.perf_counter() - start)
            busy[name].append(time.process_time() - start_busy)
    assert_on_cpu(cpu_model, cpu_opt)
    cpu_ms, neuron_ms = (statistics.median(wall[name]) * 1e3 for name in ("cpu", "neuron"))
    cpu_busy, neuron_busy = (statistics.median(busy[name]) * 1e3 for name in ("cpu", "neuron"))
    return Row(
        bf16,
        round(cpu_ms, 2),
        round(neuron_ms, 2),
        round(neuron_ms / cpu_ms, 2),
        round(cpu_busy, 2),
        round(neuron_busy, 2),
        round(neuron_busy / cpu_busy, 2),
        optimizer_impl(cpu_opt),
        optimizer_impl(neuron_opt),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny", help="model size (see the docstring)")
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

    simulator.enable(cores=2)
    with tempfile.TemporaryDirectory() as root:
        model_dir = build_model_dir(root, args.size)
        foreach = False if args.for_loop_adamw else None
        rows = [measure(model_dir, bf16, args.steps, args.warmup, foreach) for bf16 in (False, True)]

    meta = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "steps": args.steps,
        "warmup": args.warmup,
        "batch": [BATCH, SEQ],
        "size": args.size,
        "layers_hidden": list(SIZES[args.size]),
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=2))
        return
    layers, hidden = SIZES[args.size]
    print(
        f"{args.size} qwen3 ({layers} layers, hidden {hidden}), batch {BATCH}x{SEQ}, median of {args.steps} "
        f"steps after {args.warmup} warmup, torch {meta['torch']}, {meta['threads']} threads, "
        f"load average {meta['loadavg_1min']} at the end"
    )
    print(
        f"{'autocast':<10}{'cpu ms':>10}{'neuron ms':>12}{'sim/cpu':>9}"
        f"{'cpu-time cpu':>14}{'neuron':>9}{'sim/cpu':>9}   AdamW cpu / neuron"
    )
    for r in rows:
        label = "bf16" if r.autocast_bf16 else "off"
        print(
            f"{label:<10}{r.cpu_ms:>10.2f}{r.neuron_ms:>12.2f}{r.ratio:>8.2f}x"
            f"{r.cpu_cpu_ms:>14.2f}{r.neuron_cpu_ms:>9.2f}{r.cpu_time_ratio:>8.2f}x"
            f"   {r.cpu_optimizer} / {r.neuron_optimizer}"
        )


if __name__ == "__main__":
    main()
