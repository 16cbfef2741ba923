"""The planned step run for real on the simulated device: the measured peak the plan is checked against.

The simulator's allocator counts every byte a step's tensors (and the CPU kernels' own temporaries) hold on a
core, as ``torch.neuron.max_memory_allocated`` reports it on hardware; :mod:`neuroncompat.plan.step` is the same
code the plan traces, so a difference between the two is the plan's error, not a different step. Used by the
accuracy test and ``bench/bench_plan.py``; it needs the simulator enabled.
"""

from __future__ import annotations

from typing import Any

import torch

from neuroncompat.plan import step
from neuroncompat.plan.settings import PlanSettings


def measure(config: Any, settings: PlanSettings, core: int = 0, world: Any = None) -> dict[str, int]:
    """The peak allocated on ``neuron:core`` by the end of each phase of one training step (seeded weights); with
    ``world`` (transformers' ``DistributedConfig`` and device meshes of a real process group) this rank's."""
    device = torch.device("neuron", core)
    torch.manual_seed(0)
    model = step.build_model(config, settings, device, world)
    optimizer = step.build_optimizer(model, settings)
    ids = step.input_ids(config, settings, device)
    torch.accelerator.reset_peak_memory_stats(core)
    peaks: dict[str, int] = {}

    def after(phase: str) -> None:
        peaks[phase] = torch.accelerator.max_memory_allocated(core)  # torch.neuron's, as hardware reports it

    step.train_step(model, optimizer, ids, settings, after)
    return peaks
