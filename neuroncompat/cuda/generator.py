"""``torch.Generator(device="cuda")`` becomes a CPU generator, as ``neuron-migrate`` NM102 writes it.

Scripts make one to seed a ``DataLoader``/``RandomSampler`` (which needs a CPU generator anyway),
diffusers-style samplers (``randn_tensor`` draws on the generator's device, then moves the
result), or ``torch.randn(..., generator=g, device="cuda")``. There is no Neuron generator to
hand out in every TorchNeuron build, so the codemod rewrites ``"cuda"`` to ``"cpu"`` here, and
the redirect does the same at run time: seeded streams come from the CPU generator (they differ
from what CUDA drew, as they do after the codemod). Translated from any caller, like every CUDA
device argument: ``torch.Generator(device="cuda")`` can only fail on this machine.

``torch.Generator`` is replaced by a stand-in whose metaclass forwards ``isinstance`` and
``issubclass`` to the real class, so ``isinstance(g, torch.Generator)`` keeps working for
generators made before, after, or by torch itself (``torch.default_generator``).
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from neuroncompat.cuda import sites
from neuroncompat.cuda.devices import names_cuda
from neuroncompat.patch import Patch


class _GeneratorType(type):
    _real: type

    def __call__(cls, device: Any = "cpu") -> Any:
        if names_cuda(device):
            sites.record(
                sys._getframe(1), f"torch.Generator(device={device!r})", "torch.Generator(device='cpu')", "NM102"
            )
            device = "cpu"
        return cls._real(device)

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls._real)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, cls._real)


def install(patch: Patch) -> None:
    real = torch.Generator
    stand_in = _GeneratorType("Generator", (), {"_real": real, "__doc__": real.__doc__, "__module__": "torch"})
    patch.replace(torch, "Generator", stand_in)
