"""``diffusers_precision``: an fp16 diffusers pipeline or model on Neuron is warned about, and made bf16 on opt-in.

Gap (docs/gaps.md#diffusers_precision): CUDA diffusion code loads in half precision,
``DiffusionPipeline.from_pretrained(..., dtype=torch.float16)`` (or the deprecated ``torch_dtype=``, resolved in
diffusers/utils/deprecation_utils.py:15-24; read by diffusers/pipelines/pipeline_utils.py:788-789 and
diffusers/models/modeling_utils.py:905+). fp16 does run on Neuron, so nothing fails. But bf16 is Neuron's
native reduced precision: diffusers' own Neuron compile tests use bf16 and note that "Neuron runs matmuls in
bf16 internally" (diffusers git tree, tests/models/transformers/_neuron_tp_worker.py:96), and fp16's narrow
range is what makes VAEs overflow (diffusers keeps ``force_upcast`` for it). diffusers adjusts fp64 and int64
for Neuron (``_DTYPE_UNSUPPORTED_DEVICES``, diffusers/utils/torch_utils.py:41-44) but not fp16. Training
scripts are not affected here: their ``weight_dtype`` follows ``accelerator.mixed_precision``, which the
``precision`` patch already makes bf16.

Fix: ``DiffusionPipeline.from_pretrained`` and ``ModelMixin.from_pretrained`` warn once when asked for
``torch.float16`` (a dtype, or a value of a per-component dtype dict) on Neuron. The user chose fp16 and fp16
works, so it is kept; ``NEURONCOMPAT_DIFFUSERS_DTYPE=bf16`` turns every such float16 into ``torch.bfloat16``
(warned). A model loaded by a pipeline is the pipeline's call: one warning, not one per component.
``variant="fp16"`` only selects weight files and is left alone. Stands down when diffusers lists float16 among
the dtypes it adjusts for the neuron device.

Example::

    pipe = StableDiffusionPipeline.from_pretrained(path, dtype=torch.float16).to("neuron")
    # warns: bf16 is Neuron's native type; with NEURONCOMPAT_DIFFUSERS_DTYPE=bf16 the pipeline loads in bf16
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat import environment
from neuroncompat.patch import Patch

OPT_IN_ENV = "NEURONCOMPAT_DIFFUSERS_DTYPE"
_DTYPE_KEYWORDS = ("dtype", "torch_dtype")


def _on_neuron() -> bool:
    import torch

    from neuroncompat.device import neuron_available

    return neuron_available() and not torch.cuda.is_available()


def _convert() -> bool:
    return environment.choice(OPT_IN_ENV) is not None


class DiffusersPrecision(Patch):
    id = "diffusers_precision"
    reason = "fp16 diffusers pipelines run on Neuron, but bf16 is its native type: warn, bf16 on opt-in"
    targets = ("diffusers.models.modeling_utils", "diffusers.pipelines.pipeline_utils")

    def __init__(self) -> None:
        super().__init__()
        self._loading = threading.local()  # inside a pipeline's from_pretrained: its components stay quiet

    def patch_module(self, name: str, module: ModuleType) -> bool:
        import torch
        from diffusers.utils import torch_utils

        if "neuron" in getattr(torch_utils, "_DTYPE_UNSUPPORTED_DEVICES", {}).get(torch.float16, ()):
            return False
        cls = module.ModelMixin if name == "diffusers.models.modeling_utils" else module.DiffusionPipeline
        original = cls.__dict__["from_pretrained"].__func__
        self.replace(cls, "from_pretrained", classmethod(self._wrap_from_pretrained(original)))
        return True

    def _wrap_from_pretrained(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def from_pretrained(cls: type, *args: Any, **kwargs: Any) -> Any:
            depth = getattr(patch._loading, "depth", 0)
            if depth == 0 and _on_neuron():
                kwargs = patch._adjusted(cls.__name__, kwargs)
            patch._loading.depth = depth + 1
            try:
                return original(cls, *args, **kwargs)
            finally:
                patch._loading.depth = depth

        return from_pretrained

    def _adjusted(self, owner: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` with each float16 dtype warned about, and made bfloat16 on opt-in."""
        import torch

        kwargs = dict(kwargs)
        for keyword in _DTYPE_KEYWORDS:
            value = kwargs.get(keyword)
            fp16 = [key for key, dtype in value.items() if dtype == torch.float16] if isinstance(value, dict) else []
            if value != torch.float16 and not fp16:
                continue
            shown = f"{keyword}=torch.float16" if not fp16 else f"{keyword}={{{', '.join(map(repr, fp16))}: float16}}"
            if not _convert():
                self.warn(
                    "%s.from_pretrained(%s) kept: fp16 runs on Neuron, but bf16 is its native type (the range of "
                    "fp32; fp16 VAEs can overflow). Pass dtype=torch.bfloat16, or set %s=bf16 to convert",
                    owner,
                    shown,
                    OPT_IN_ENV,
                )
                continue
            if isinstance(value, dict):
                kwargs[keyword] = {key: torch.bfloat16 if key in fp16 else dtype for key, dtype in value.items()}
            else:
                kwargs[keyword] = torch.bfloat16
            self.warn("%s.from_pretrained(%s) -> torch.bfloat16 (%s=bf16)", owner, shown, OPT_IN_ENV)
        return kwargs
