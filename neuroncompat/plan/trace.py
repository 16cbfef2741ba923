"""One step traced on fake tensors under PyTorch's MemTracker: peak memory by category, the phase it falls in,
and the largest tensors, with no weights and no real memory.

``FakeTensorMode`` runs every op with shapes only, so a full-size model costs seconds of CPU and a few hundred
MB; ``torch.distributed._tools.mem_tracker.MemTracker`` (entered inside the fake mode, as it expects) counts
each storage once, by what it holds: parameters, buffers, gradients, activations, temporaries (what backward
makes besides gradients), optimizer states (with the optimizer step's own temporaries, which it counts there)
and the inputs (registered with ``track_external``, reported as "inputs").
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed._tools.mem_tracker import MemTracker
from torch.distributed.fsdp import FSDPModule

from neuroncompat.plan import parallel, step
from neuroncompat.plan.largest import LargestTensors, Made, local
from neuroncompat.plan.parallel import Layout
from neuroncompat.plan.settings import PlanSettings

# MemTracker's reference types (its _MemRefType values, and FSDPMemTracker's _FSDPRefType values) by the names
# the report uses: on an FSDP layout "parameters" and "gradients" are this rank's shards, and the all-gathered
# (unsharded) copies and the collectives' buffers are categories of their own
CATEGORIES = {
    "Parameter": "parameters",
    "Sharded Param": "parameters",
    "Unsharded Param": "unsharded_parameters",
    "Buffer": "buffers",
    "Gradient": "gradients",
    "Sharded Grad": "gradients",
    "Unsharded Grad": "unsharded_gradients",
    "Activation": "activations",
    "Temp": "temporaries",
    "All Gather": "all_gather",
    "Reduce Scatter": "reduce_scatter",
    "Optstate": "optimizer_states",
    "OptState": "optimizer_states",
    "Other": "inputs",
    "Inputs": "inputs",
}
_TOTAL = "Total"


@dataclass
class Trace:
    """What one traced step used: the peak, its split by category, where it fell, and the largest tensors."""

    peak_bytes: int
    categories: dict[str, int]
    phase: str
    phase_peaks: dict[str, int]
    largest: list[Made]
    parameters: list[tuple[str, int]] = field(default_factory=list)
    parameter_count: int = 0
    kv_cache_bytes: int | None = None


def _peak(tracker: MemTracker) -> tuple[int, dict[str, int]]:
    """The peak total so far and its split, summed over devices (one fake device: the CPU)."""
    total = 0
    split = dict.fromkeys(CATEGORIES.values(), 0)
    for snapshot in tracker.get_tracker_snapshot("peak").values():
        for key, value in snapshot.items():
            if key == _TOTAL:
                total += value
            else:
                split[CATEGORIES[getattr(key, "value", key)]] += value
    return total, split


@contextlib.contextmanager
def _one_sequence_per_row() -> Iterator[None]:
    """Answer transformers' packed-sequence check as an eager run on the planned batch answers it.

    With no attention mask and no cache (a training step), ``create_causal_mask`` asks
    ``find_packed_sequence_indices`` whether the position ids pack several sequences into a row; that reads the
    ids' values, which a fake tensor does not have, so on fake tensors it answers "maybe" and the causal mask
    is materialised ([batch, 1, seq, seq]) and handed to SDPA, where an eager run on real ids answers "no" and
    SDPA runs with ``is_causal``. The planned batch is one sequence per row by construction, so the trace gets
    the eager answer (without this, a gradient-checkpointed step's backward was planned 10% high). Position ids
    that are real (a script's own, ``plan -- python train.py``) are answered from their values, as eager does, and
    Dynamo (``--graphs``) traces the check itself.
    """
    from transformers import masking_utils

    found = masking_utils.find_packed_sequence_indices

    def answered(position_ids: Any) -> Any:
        if torch.compiler.is_compiling():  # Dynamo (plan --graphs) traces the check as transformers wrote it
            return found(position_ids)
        if isinstance(position_ids, FakeTensor):
            return None
        with unset_fake_temporarily():
            return found(position_ids)

    masking_utils.find_packed_sequence_indices = answered
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = found


class _NoHook:
    """The handle of a gradient hook never installed (a frozen parameter's)."""

    def remove(self) -> None:
        return None


def _tracker(model: torch.nn.Module, optimizer: Any, ids: torch.Tensor) -> MemTracker:
    """FSDPMemTracker for an FSDP2 model (it tells this rank's shards from the all-gathered copies; a LoRA plan's
    FSDP root is the transformers model inside peft's wrapper), else
    MemTracker; either counts the model, the optimizer's states and the inputs.

    MemTracker installs a gradient hook on every parameter a module holds, and torch refuses a hook on a tensor
    that does not require gradients: a LoRA plan's frozen base weights. They get no gradient, so each is entered
    as already hooked (MemTracker's own table of hook handles) and still counted as a parameter."""
    tracker: MemTracker
    root = next((module for module in model.modules() if isinstance(module, FSDPModule)), None)  # inside peft's
    if root is not None:
        tracker = FSDPMemTracker(root, optimizer)
        tracker.track_inputs((ids,))
    else:
        tracker = MemTracker()
        tracker.track_external(model, ids, *([optimizer] if optimizer is not None else []))
    for param in model.parameters():
        if not param.requires_grad:
            tracker._param_to_grad_hook_handles[param] = (_NoHook(), _NoHook())
    _track_the_step_peak_only(tracker)
    return tracker


def _track_the_step_peak_only(tracker: MemTracker) -> None:
    """Keep MemTracker's peak of the whole step, as it computes it, and drop its per-module peaks, which the plan
    never reads and which cost most of a trace's CPU.

    After every op MemTracker walks every module it has seen (about 420 in a 32-layer Llama) to raise the peak of
    those still running, and each step of that walk resolves a weak reference whose check calls ``hasattr`` on an
    ``nn.Module``, a failing ``__getattr__``: 70% of a one-core 8B-shaped trace's CPU time in a profile
    (bench/README.md). The step's peak and its split by category are this method's last lines, unchanged."""
    from copy import deepcopy

    def update_step_peak(peak_state: Any) -> None:
        for device, snapshot in tracker._curr_mem_snap.items():
            if tracker._peak_mem.get(device, 0) < snapshot[_TOTAL]:
                tracker._peak_mem[device] = snapshot[_TOTAL]
                tracker._peak_mem_snap[device] = deepcopy(snapshot)

    tracker._update_peak_stats = update_step_peak  # type: ignore[method-assign]


def trace(config: Any, settings: PlanSettings, layout: Layout | None = None) -> Trace:
    """Build MODEL from ``config`` on fake tensors, sharded by ``layout`` over a fake process group, and run the
    planned step of its rank 0 under MemTracker."""
    layout = layout or Layout()
    parallel.check(config, layout)
    with (
        warnings.catch_warnings(),
        parallel.fake_world(layout) as world,
        parallel.on_fake_tensors(),
        FakeTensorMode(),
        _one_sequence_per_row(),
    ):
        # FSDP2 warns that a module returns a view an in-place op could break; that is about values, not memory
        warnings.filterwarnings("ignore", message=".*returned a view tensor", category=UserWarning)
        model = step.build_model(config, settings, "cpu", world)
        optimizer = step.build_optimizer(model, settings) if settings.task == "train" else None
        ids = step.input_ids(config, settings, "cpu")
        tracker = _tracker(model, optimizer, ids)
        largest = LargestTensors()
        phase_peaks: dict[str, int] = {}

        def after(phase: str) -> None:
            phase_peaks[phase] = _peak(tracker)[0]
            if phase == "prefill":  # MemTracker refuses a second forward (decode) while it holds the first's
                tracker.reset_mod_stats()
            largest.phase = _next_phase(settings, phase)

        largest.phase = _next_phase(settings, None)
        cache = None
        with tracker, largest:
            if optimizer is not None:
                step.train_step(model, optimizer, ids, settings, after)
            else:
                cache = step.generate_step(model, config, ids, settings, after)
        total, split = _peak(tracker)
        params = sorted(
            ((name, local(p).numel() * p.element_size()) for name, p in model.named_parameters()),
            key=lambda item: item[1],
            reverse=True,
        )
        return Trace(
            peak_bytes=total,
            categories=split,
            phase=next(phase for phase, peak in phase_peaks.items() if peak == total),
            phase_peaks=phase_peaks,
            largest=largest.top(),
            parameters=params[:3],
            parameter_count=sum(p.numel() for p in model.parameters()),  # a DTensor's numel is the whole one
            kv_cache_bytes=_cache_bytes(cache),
        )


def _next_phase(settings: PlanSettings, done: str | None) -> str:
    """The phase that starts once ``done`` ends (the first phase for None)."""
    phases = step.TRAIN_PHASES if settings.task == "train" else step.GENERATE_PHASES
    index = 0 if done is None else phases.index(done) + 1
    return phases[min(index, len(phases) - 1)]


def _cache_bytes(cache: Any) -> int | None:
    """The static cache's keys and values, for a generation plan; None for training."""
    if cache is None:
        return None
    tensors = [t for layer in cache.layers for t in (layer.keys, layer.values) if isinstance(t, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)
