"""``torch.backends.cudnn.*`` and ``torch.backends.cuda.matmul.*`` flags set by user code: logged.

CUDA scripts open with ``torch.backends.cudnn.benchmark = True`` and
``torch.backends.cuda.matmul.allow_tf32 = True`` (nanoGPT, pytorch/examples). They tune cuDNN and
cuBLAS kernels that do not run on a NeuronCore, so the redirect leaves the assignment as it is
(torch stores the flag; ``matmul.allow_tf32 = True`` also sets
``torch.get_float32_matmul_precision()`` to ``"high"``, as on any machine) and logs the site as
having no effect on Neuron. Only assignments pay for this (the modules' ``__setattr__``); reads
are untouched. No ``neuron-migrate`` rule rewrites these lines (NM206 leaves them, as harmless).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from neuroncompat.cuda import sites
from neuroncompat.cuda.callers import is_user_frame
from neuroncompat.patch import Patch

_NO_EFFECT = "no effect on Neuron (tunes CUDA kernels that do not run here)"


def _logging_setattr(original: Callable[[Any, str, Any], None], prefix: str) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        frame = sys._getframe(1)
        if is_user_frame(frame):
            sites.record(frame, f"{prefix}.{name} = {value!r}", _NO_EFFECT, None)
        original(self, name, value)

    return __setattr__


def install(patch: Patch) -> None:
    cudnn = type(torch.backends.cudnn)
    original = vars(cudnn).get("__setattr__", types.ModuleType.__setattr__)
    patch.replace(cudnn, "__setattr__", _logging_setattr(original, "torch.backends.cudnn"))
    matmul = type(torch.backends.cuda.matmul)
    patch.replace(matmul, "__setattr__", _logging_setattr(matmul.__dict__["__setattr__"], "torch.backends.cuda.matmul"))
