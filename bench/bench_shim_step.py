"""Whether the applied shim slows a training step on the simulated ``neuron`` device (expected ratio 1.00).

The patches act on loading, generation, compile and the environment, not on the eager ops of a
step; this checks that their side effects (a wrapped ``torch.compile``, post-import hooks left in
``sys.meta_path`` for targets not imported yet, environment variables) cost a step nothing.

How: one process, simulator on (2 cores), the tiny qwen3 model of ``bench_simulator_step.py``
(2 layers, hidden 64, batch 4 x 64, fp32, AdamW) on ``neuron:0``. ``import neuroncompat``
already ran ``apply()`` before the device existed, so it patched nothing (``is_active()`` is
False), and it is reverted before the device is enabled (which would start it): that is the "off" state. "on" is ``neuroncompat.apply()`` with the device enabled, and
``neuroncompat.revert()`` returns to "off". After ``--warmup`` untimed steps the states alternate
in blocks of ``--block`` steps in the order off, on, on, off, ... (ABBA), so warmup drift and load
from other processes fall on both alike; each state gets ``--steps`` timed steps and the figure is
the median step time.

Run: ``python bench/bench_shim_step.py [--steps 20] [--block 2] [--warmup 3] [--json]``
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ.pop("NEURONCOMPAT_SIMULATE", None)  # the device must not exist at import neuroncompat
os.environ.pop("NEURONCOMPAT_DISABLE", None)  # every patch takes part in "on"

from bench_simulator_step import BATCH, SEQ, build_model_dir, make_step

import neuroncompat
from neuroncompat import shim, simulator


def set_shim(on: bool) -> None:
    """Switch between the two states compared, checking the switch took."""
    if on:
        neuroncompat.apply()
    else:
        neuroncompat.revert()
    if shim.is_active() != on:
        raise AssertionError(f"shim active={shim.is_active()}, wanted {on}")


def timed_blocks(step: Callable[[], float], steps: int, block: int) -> dict[str, list[float]]:
    """Step times per state, taken in ABBA blocks of ``block`` steps until each has ``steps``."""
    times: dict[str, list[float]] = {"off": [], "on": []}
    pattern = ("off", "on", "on", "off")
    i = 0
    while min(len(t) for t in times.values()) < steps:
        state = pattern[i % len(pattern)]
        i += 1
        set_shim(state == "on")
        for _ in range(min(block, steps - len(times[state]))):
            start = time.perf_counter()
            step()
            times[state].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per state (median reported)")
    parser.add_argument("--block", type=int, default=2, help="steps between switching the shim on or off")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()

    if shim.is_active():
        raise AssertionError("import neuroncompat patched something before the device existed")
    simulator.enable(cores=2, shim=False)  # "off" first; set_shim switches
    with tempfile.TemporaryDirectory() as root:
        step, _, _ = make_step(build_model_dir(root, "tiny"), "neuron", bf16=False, foreach=None)
        for _ in range(args.warmup):
            step()
        set_shim(True)
        patch_states = dict(collections.Counter(s.state for s in neuroncompat.status().values()))
        times = timed_blocks(step, args.steps, args.block)
    set_shim(False)

    off_ms = statistics.median(times["off"]) * 1e3
    on_ms = statistics.median(times["on"]) * 1e3
    result = {
        "steps": args.steps,
        "block": args.block,
        "warmup": args.warmup,
        "off_ms": round(off_ms, 2),
        "on_ms": round(on_ms, 2),
        "ratio_on_off": round(on_ms / off_ms, 3),
        "patch_states_when_on": patch_states,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"training step on simulated neuron:0, tiny qwen3, batch {BATCH}x{SEQ}, fp32, "
        f"median of {args.steps} steps per state, ABBA blocks of {args.block}"
    )
    print(f"{'shim':<6}{'step ms':>10}")
    print(f"{'off':<6}{off_ms:>10.2f}")
    print(f"{'on':<6}{on_ms:>10.2f}")
    print(f"ratio on/off: {on_ms / off_ms:.3f}")
    print("patch states when on: " + ", ".join(f"{n} {s}" for s, n in sorted(patch_states.items())))


if __name__ == "__main__":
    main()
