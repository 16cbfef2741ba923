"""``tensor.is_cuda`` read by user code is True for a tensor on the NeuronCore.

Scripts branch on it the way they branch on ``torch.cuda.is_available()``: ``if x.is_cuda:
torch.cuda.synchronize()``, ``pin = not x.is_cuda``, ``assert x.is_cuda, "move the batch to the
GPU first"``. Under the redirect the tensor the script placed "on CUDA" is on ``neuron``, so for
user code (:mod:`neuroncompat.cuda.callers`) ``is_cuda`` answers whether the tensor is where the
script's ``"cuda"`` went. Library code keeps torch's answer (False): transformers, accelerate and
torch pick CUDA kernels and CUDA streams on ``is_cuda``, which do not exist here.

The property is cheap on every other tensor: the device type is checked first, and the caller's
frame is looked at only for a tensor on ``neuron``. Inside a ``torch.compile``d function Dynamo
answers ``is_cuda`` from the traced tensor (False), as for every CUDA call there.
No ``neuron-migrate`` rule rewrites ``is_cuda``; the log names the site with no rule.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from neuroncompat.cuda import sites
from neuroncompat.cuda.callers import is_user_frame
from neuroncompat.patch import Patch


def _is_cuda(original: Any) -> property:
    read = original.__get__

    def is_cuda(self: torch.Tensor) -> bool:
        if self.device.type != "neuron":
            return read(self)
        frame = sys._getframe(1)
        if not is_user_frame(frame):
            return False
        sites.record(frame, "Tensor.is_cuda", "True (the tensor is on neuron, where 'cuda' went)", None)
        return True

    return property(is_cuda, doc="True for a NeuronCore tensor read from user code (NEURONCOMPAT_CUDA=redirect).")


def install(patch: Patch) -> None:
    patch.replace(torch.Tensor, "is_cuda", _is_cuda(torch._C.TensorBase.__dict__["is_cuda"]))
