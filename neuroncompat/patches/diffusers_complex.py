"""``diffusers_complex``: a diffusers model that computes in complex64 warns when it is put on a NeuronCore.

Gap (docs/gaps.md#diffusers_complex): 11 transformers of diffusers 0.42 build their rotary embeddings as complex64
tensors (``torch.polar``, ``torch.view_as_complex``, ``get_1d_rotary_pos_embed(use_real=False)``): QwenImage
(``models/transformers/transformer_qwenimage.py:137``, ``:233``, ``:357``, ``:549-552``), QwenImage 2.1, Lumina2,
Z-Image and its ControlNet, Bria, Bria-Fibo2, AnyFlow, AnyFlow-Far, NucleusMoE-Image, SANA-WM and Wan-Animate 2.
Complex dtypes are documented unsupported on the device (neuronx-cc NCC_EVRF004); TorchNeuron decomposes
complex ops before lowering when ``TORCH_NEURONX_COMPLEX_DECOMPOSE`` is on (its default with PyTorch >= 2.13,
``torch/reference/env-vars.html``), which is a compile-time pass: what eager complex ops do on a NeuronCore is
not documented, and regional compilation (``compile_repeated_blocks``) leaves the rotary embedding that makes
them outside the compiled blocks. diffusers 0.40 and 0.41 had a real-valued Neuron path for QwenImage
(``ROPE_PER_DEVICE``); 0.42 removed it. Nothing fails on the simulator, which computes complex64 like the CPU.

Fix: after ``ModelMixin.to`` or ``from_pretrained`` puts a model on a NeuronCore, warn once per class whose
module uses complex tensors (read from its source; a module that mentions ``neuron`` is taken as handling it):
the variable's state, and the advice to compile the whole model. A ``TORCH_NEURONX_COMPLEX_DECOMPOSE`` set to
off is warned as such. Nothing is changed. ``neuroncompat simulate`` reports each complex op on the device.
Stands down when diffusers lists ``neuron`` for complex dtypes in ``_DTYPE_UNSUPPORTED_DEVICES``
(``utils/torch_utils.py:41-44``, where it lists fp64 and int64 for Neuron).

Example::

    pipe = QwenImagePipeline.from_pretrained(path, dtype=torch.bfloat16).to("neuron")
    # WARNING [diffusers_complex] QwenImageTransformer2DModel computes complex64 rotary embeddings on the
    # NeuronCore: ... compile the whole transformer (torch.compile(pipe.transformer, backend="neuron", ...))
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

DECOMPOSE_ENV = "TORCH_NEURONX_COMPLEX_DECOMPOSE"
_COMPLEX = re.compile(r"view_as_complex|torch\.polar|use_real\s*=\s*False|torch\.complex64|\.cfloat\(")
_OFF = ("0", "false", "no", "off")


class DiffusersComplex(Patch):
    id = "diffusers_complex"
    reason = "11 diffusers 0.42 models compute complex64 on the device, lowered only by TorchNeuron's compile"
    targets = ("diffusers.models.modeling_utils",)

    def __init__(self) -> None:
        super().__init__()
        self._uses_complex: dict[type, bool] = {}

    def patch_module(self, name: str, module: ModuleType) -> bool:
        import torch
        from diffusers.utils import torch_utils

        unsupported = getattr(torch_utils, "_DTYPE_UNSUPPORTED_DEVICES", {})
        if any("neuron" in unsupported.get(dtype, ()) for dtype in (torch.complex64, torch.complex128)):
            return False
        cls = module.ModelMixin
        self.replace(cls, "to", self._after(cls.__dict__["to"]))
        original = cls.__dict__["from_pretrained"].__func__

        @functools.wraps(original)
        def from_pretrained(owner: type, *args: Any, **kwargs: Any) -> Any:
            model = original(owner, *args, **kwargs)
            self._check(model)
            return model

        self.replace(cls, "from_pretrained", classmethod(from_pretrained))
        return True

    def _after(self, to: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(to)
        def wrapper(model: Any, *args: Any, **kwargs: Any) -> Any:
            result = to(model, *args, **kwargs)
            self._check(result)
            return result

        return wrapper

    def _check(self, model: Any) -> None:
        import torch

        parameter = next(model.parameters(), None) if isinstance(model, torch.nn.Module) else None
        if parameter is None or parameter.device.type != "neuron" or not self._complex(type(model)):
            return
        name = type(model).__name__
        if os.environ.get(DECOMPOSE_ENV, "").strip().lower() in _OFF:
            self.warn(
                "%s computes complex64 (its rotary embeddings) on the NeuronCore with %s=%s: neuronx-cc rejects "
                "complex dtypes (NCC_EVRF004) unless TorchNeuron decomposes them; unset it (on by default with "
                "PyTorch >= 2.13)",
                name,
                DECOMPOSE_ENV,
                os.environ[DECOMPOSE_ENV],
            )
            return
        self.warn(
            "%s computes complex64 (its rotary embeddings) on the NeuronCore: TorchNeuron decomposes complex ops "
            "when it compiles (%s, on by default with PyTorch >= 2.13); eager complex ops on the device are not "
            "documented, and compile_repeated_blocks leaves the rotary embedding outside its graphs. Compile the "
            'whole model (torch.compile(model, backend="neuron", fullgraph=True, dynamic=False)); '
            "neuroncompat simulate lists each complex op",
            name,
            DECOMPOSE_ENV,
        )

    def _complex(self, cls: type) -> bool:
        """Whether ``cls``'s own module builds complex tensors (and does not mention Neuron)."""
        if cls not in self._uses_complex:
            module = sys.modules.get(cls.__module__)
            try:
                source = inspect.getsource(module) if module is not None else ""
            except (OSError, TypeError):
                source = ""
            self._uses_complex[cls] = bool(_COMPLEX.search(source)) and "neuron" not in source
        return self._uses_complex[cls]
