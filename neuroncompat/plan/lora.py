"""LoRA adapters on the fake model with the real peft: the base frozen (no gradients, no optimizer state), only the
adapters trained, as ``get_peft_model`` sets a fine-tuning script up.

peft moves each new adapter to its base layer's device and dtype with ``Module.to``, and on torch 2.13
``Module.to`` cannot run on a parameter made under ``FakeTensorMode`` (torch swaps the parameter, and the fake
mode holds a weak reference to it: "Cannot swap t1 because it has weakref associated with it"). So the model and
its adapters are built on the meta device, where peft's moves work and no memory is used, and then each parameter
and buffer is replaced by an empty one on the planned device (:func:`materialize`): under the plan's fake mode a
fake tensor, on the simulated device a real one. Shared parameters (tied embeddings) stay shared.

With a parallel layout the order is a script's: transformers' TP plan shards the base on meta (DTensor, as
``from_pretrained(distributed_config=...)`` does), peft then adds the adapters and shards them by the same plan
(peft's own DTensor TP support: a column-parallel layer's ``lora_B`` is split by rows, a row-parallel layer's
``lora_A`` by columns), :func:`materialize` gives every DTensor an empty local shard, and FSDP2 shards the whole,
adapters included (:func:`neuroncompat.plan.parallel.shard_states`), as accelerate wraps a peft model.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from neuroncompat.plan.settings import PlanInputError, PlanSettings


def wrap(model: torch.nn.Module, settings: PlanSettings) -> Any:
    """``model`` with LoRA adapters of rank ``settings.lora_r`` on ``settings.lora_targets`` (peft's default
    modules for the model type when none are given)."""
    from peft import LoraConfig, get_peft_model

    targets = list(settings.lora_targets) or None
    try:
        with warnings.catch_warnings():
            # peft 0.22 reads `model.is_gradient_checkpointing`, which transformers 5 deprecates with a FutureWarning:
            # printed above the plan's verdict, about a call the user never made
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            return get_peft_model(model, LoraConfig(r=settings.lora_r or 8, target_modules=targets))
    except ValueError as exc:  # a target that matches no module, a model type peft has no default for
        raise PlanInputError(f"peft cannot add LoRA adapters to this model: {exc}") from exc


def materialize(model: torch.nn.Module, device: str | torch.device) -> torch.nn.Module:
    """Every meta parameter and buffer of ``model`` replaced by an empty tensor of its shape on ``device``."""
    made: dict[int, torch.Tensor] = {}

    def empty(tensor: torch.Tensor, parameter: bool) -> torch.Tensor:
        if id(tensor) not in made:
            new = _empty_like(tensor, device)
            made[id(tensor)] = torch.nn.Parameter(new, requires_grad=tensor.requires_grad) if parameter else new
        return made[id(tensor)]

    for module in model.modules():
        for name, param in module._parameters.items():
            if param is not None:
                module._parameters[name] = empty(param, parameter=True)  # type: ignore[assignment]
        for name, buffer in module._buffers.items():
            if buffer is not None:
                module._buffers[name] = empty(buffer, parameter=False)
    return model


def _empty_like(tensor: torch.Tensor, device: str | torch.device) -> torch.Tensor:
    """An empty tensor of ``tensor``'s shape and dtype on ``device``; for a DTensor (a TP-sharded weight) a DTensor of
    the same placements whose local shard is empty on ``device``."""
    from torch.distributed.tensor import DTensor

    if not isinstance(tensor, DTensor):
        return torch.empty(tensor.shape, dtype=tensor.dtype, device=device)
    with unset_fake_temporarily():  # the meta shard's shape; a view op the fake mode would refuse on a meta tensor
        shape = tensor.to_local().shape
    local = torch.empty(shape, dtype=tensor.dtype, device=device)
    return DTensor.from_local(
        local, tensor.device_mesh, tensor.placements, run_check=False, shape=tensor.shape, stride=tensor.stride()
    )
