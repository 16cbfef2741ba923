"""``unused_device``: a process that built a model but never placed a tensor on a NeuronCore says so at exit.

Gap (docs/gaps.md#unused_device): nothing upstream notices when a script meant for an accelerator
computes on the CPU. A CUDA script's ``device = "cuda" if torch.cuda.is_available() else "cpu"`` is
``"cpu"`` on Neuron (``torch.cuda.is_available()`` is False there, and the shim leaves it so), every
``.to(device)`` stays on the host, and the script trains, slowly, and exits 0 with the NeuronCores
idle (issue 27: a script whose every ``.to`` was gated so trained on the CPU under the shim).

Fix: when torch is imported, ``torch.nn.Parameter.__new__`` is wrapped once: the first parameter
created (any model, on any device) notes that this process builds a model and puts torch's own
``__new__`` back, so nothing else ever runs through the wrapper. (A global module hook would see
forwards instead, but its mere presence makes ``torch.compile(module)`` warn and Dynamo trace and
guard differently.) At exit (``atexit``, so per process: every torchrun rank, every spawned child)
a WARNING names the fixes, ``NEURONCOMPAT_CUDA=redirect`` and ``neuron-migrate``, when all hold:

- a parameter was created in this process: launchers (torchrun, ``accelerate launch``, an
  ``mp.spawn`` parent) and data-preparation scripts build no model and say nothing;
- the process is not dying of an uncaught exception (its traceback is the news);
- every NeuronCore's allocator says it never allocated: ``allocation.all.allocated`` (cumulative,
  untouched by ``reset_peak_memory_stats``) from ``torch.accelerator.memory_stats``, else the peak
  from ``max_memory_allocated``. Where neither can be read, nothing is said: unknown is not unused.

Nothing a script sees is changed. Stands down never: no library can fix this gap.

Example::

    device = "cuda" if torch.cuda.is_available() else "cpu"    # "cpu" on Neuron
    model = torch.nn.Linear(8, 8).to(device)
    ...                                                         # trains on the CPU, exits 0
    # at exit: WARNING [unused_device] this process built a model but placed no tensor on a NeuronCore ...
"""

from __future__ import annotations

import atexit
import os
import sys
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch


class UnusedDevice(Patch):
    id = "unused_device"
    reason = "a run that never placed a tensor on a NeuronCore computes on the CPU silently: warn at exit"
    targets = ("torch",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        self._built_a_model = False
        parameter = module.nn.Parameter
        torch_new = parameter.__dict__["__new__"]  # a staticmethod
        patch = self

        def first_parameter(cls: type, *args: Any, **kwargs: Any) -> Any:
            patch._built_a_model = True
            parameter.__new__ = torch_new
            return torch_new.__func__(cls, *args, **kwargs)

        self.replace(parameter, "__new__", staticmethod(first_parameter))
        atexit.register(self._at_exit)
        self.undo_with(lambda: atexit.unregister(self._at_exit))
        return True

    def _at_exit(self) -> None:
        if not self._built_a_model or getattr(sys, "last_exc", None) or getattr(sys, "last_value", None):
            return
        if _placed_on_a_core() is not False:
            return
        rank = os.environ.get("RANK") if os.environ.get("WORLD_SIZE", "1") != "1" else None
        redirect = sys.modules.get("neuroncompat.cuda")
        if redirect is not None and redirect.is_redirected():
            fix = "Its devices never name a NeuronCore ('neuron', or 'cuda' under the redirect): check where it picks them"
        else:
            fix = (
                "A script that picks its device with torch.cuda.is_available() or 'cuda' runs on Neuron as written "
                "with NEURONCOMPAT_CUDA=redirect, or after neuron-migrate rewrites it"
            )
        self.warn(
            "this process%s built a model but placed no tensor on a NeuronCore: it computed on the CPU. "
            "%s (NEURONCOMPAT_DISABLE=%s silences this)",
            f" (rank {rank})" if rank is not None else "",
            fix,
            self.id,
        )


def _placed_on_a_core() -> bool | None:
    """True if some NeuronCore's allocator ever allocated in this process, False if every core says
    it never did, None where that cannot be read."""
    import torch

    neuron = getattr(torch, "neuron", None)
    try:
        cores = neuron.device_count() if neuron is not None else 0
        if not cores:
            return None
        return any(_allocated_ever(neuron, core) for core in range(cores))
    except Exception:  # noqa: BLE001  (a runtime shutting down, a counter this TorchNeuron lacks: unknown)
        return None


def _allocated_ever(neuron: Any, core: int) -> bool:
    import torch

    try:
        count = torch.accelerator.memory_stats(core).get("allocation.all.allocated")
    except RuntimeError:  # "Allocator for neuron is not a DeviceAllocator"
        count = None
    if count is not None:
        return bool(count > 0)
    peak = getattr(neuron, "max_memory_allocated", None) or torch.accelerator.max_memory_allocated
    return bool(peak(core) > 0)
