"""``quantization``: bitsandbytes quantization requests load unquantized on Neuron, loudly.

Gap: bitsandbytes has no Neuron build. ``from_pretrained(quantization_config=
BitsAndBytesConfig(load_in_4bit=True))`` (and TRL's ``--load_in_4bit`` / ``--load_in_8bit``,
which ``trl.get_quantization_config`` turns into one, trl/trainer/utils.py:261-277, passed as
``model_init_kwargs["quantization_config"]``, trl/trainer/sft_trainer.py:684-690) reach
``get_hf_quantizer`` (transformers/modeling_utils.py:4305, quantizers/auto.py:338), whose bnb
quantizer's ``validate_environment`` fails without bitsandbytes. QLoRA recipes carry this as a
CLI flag, so no codemod sees it.

Fix: wrap ``transformers.modeling_utils.get_hf_quantizer`` (looked up by name in
``from_pretrained``; wrapping it rather than ``from_pretrained`` leaves the ``device_map`` patch's
wrapper alone). On Neuron with CUDA unavailable, a bitsandbytes ``quantization_config`` passed by
the caller is dropped with a WARNING that the weights now load unquantized, in the dtype the
caller asked for (``dtype=torch.bfloat16`` is the Neuron choice): about 4x (4-bit) or 2x (8-bit)
the memory of the quantized model. Never silent. The same WARNING says what a script that scans the
model for bitsandbytes layers (``isinstance(m, bnb.nn.Linear4bit)``, to pick LoRA's ``target_modules``)
will see, none, so PEFT's "No `target_modules` passed" that follows has its cause named, with the fixes:
explicit ``target_modules`` or ``neuron-migrate`` (NM209 rewrites the scan to ``torch.nn.Linear``). Other quantization methods and checkpoints that
are already bnb-quantized (their weights cannot be loaded without bitsandbytes) are left to
transformers. Stands down when both bnb quantizers' ``validate_environment`` know Neuron.

Example::

    model = AutoModelForCausalLM.from_pretrained(path, quantization_config=BitsAndBytesConfig(load_in_4bit=True), dtype=torch.bfloat16)
    # before: ImportError (bitsandbytes)   after: bf16 weights on Neuron, WARNING about the memory
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

# The layer class bitsandbytes swaps into a quantized model, which scripts scan for.
_BNB_LAYERS = {4: "Linear4bit", 8: "Linear8bitLt"}


def _bitsandbytes_bits(quantization_config: Any) -> int | None:
    """4 or 8 for a bitsandbytes config (object or dict), else None."""
    get = (
        quantization_config.get
        if isinstance(quantization_config, dict)
        else lambda key: getattr(quantization_config, key, None)
    )
    if get("quant_method") != "bitsandbytes" and not (get("load_in_4bit") or get("load_in_8bit")):
        return None
    return 4 if get("load_in_4bit") else 8


class Quantization(Patch):
    id = "quantization"
    reason = "bitsandbytes has no Neuron build: load unquantized, with a loud warning about memory"
    targets = ("transformers.modeling_utils",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        from transformers.quantizers import quantizer_bnb_4bit, quantizer_bnb_8bit

        quantizers = (quantizer_bnb_4bit.Bnb4BitHfQuantizer, quantizer_bnb_8bit.Bnb8BitHfQuantizer)
        if all("neuron" in inspect.getsource(quantizer.validate_environment) for quantizer in quantizers):
            return False
        self.replace(module, "get_hf_quantizer", self._wrap(module.get_hf_quantizer))
        return True

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def get_hf_quantizer(config: Any, quantization_config: Any, *args: Any, **kwargs: Any) -> Any:
            bits = _bitsandbytes_bits(quantization_config) if quantization_config is not None else None
            if bits is not None and patch._on_neuron():
                patch.warn(
                    "bitsandbytes %d-bit quantization dropped: bitsandbytes has no Neuron build. %s loads UNQUANTIZED, "
                    "about %dx the memory of the %d-bit model; pass dtype=torch.bfloat16 and check it fits a NeuronCore. "
                    "Its linear layers are torch.nn.Linear, not bitsandbytes': a script that looks for "
                    "bnb.nn.%s modules (isinstance(m, bnb.nn.%s), as QLoRA scripts pick LoRA's target_modules) "
                    "finds none, and PEFT stops with 'No `target_modules` passed'. Pass target_modules explicitly "
                    '(["q_proj", "v_proj"], or "all-linear"), or rewrite the script with neuron-migrate (rule NM209 '
                    "makes such scans look for torch.nn.Linear)",
                    bits,
                    getattr(config, "_name_or_path", None) or type(config).__name__,
                    16 // bits,
                    bits,
                    _BNB_LAYERS[bits],
                    _BNB_LAYERS[bits],
                )
                quantization_config = None
            return original(config, quantization_config, *args, **kwargs)

        return get_hf_quantizer

    @staticmethod
    def _on_neuron() -> bool:
        import torch

        from neuroncompat.device import neuron_available

        return neuron_available() and not torch.cuda.is_available()
