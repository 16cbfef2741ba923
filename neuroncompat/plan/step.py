"""The step a plan measures, written once so the plan (on fake tensors) and the accuracy test (on the simulated
device, for real) run exactly the same code: the model built from the config, the optimizer, the inputs, and
the phases of one training step or one generation (prefill, then one decode step on a static cache).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from neuroncompat.plan import lora, parallel
from neuroncompat.plan.settings import PlanSettings

TRAIN_PHASES = ("forward", "backward", "optimizer")
GENERATE_PHASES = ("prefill", "decode")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def build_model(config: Any, settings: PlanSettings, device: str | torch.device, world: Any = None) -> torch.nn.Module:
    """The model from its config alone (random weights: the plan never reads a checkpoint), on ``device``, sharded
    over ``world`` (:func:`neuroncompat.plan.parallel.fake_world`; None for one core) as ``from_pretrained`` shards
    it, before the script enables checkpointing."""
    from transformers import AutoModelForCausalLM

    model: Any
    if settings.lora_r:  # built on meta, outside the fake mode, then given empty tensors (neuroncompat/plan/lora.py)
        with unset_fake_temporarily(), torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[settings.dtype])
            model = lora.wrap(parallel.distribute(model, world, fsdp=False), settings)
        model = lora.materialize(model, device)
        parallel.shard_states(model.get_base_model(), world)
    else:
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[settings.dtype])
        model = parallel.distribute(model, world)
    if settings.task == "train":
        model.train()
        if settings.gradient_checkpointing:
            model.activation_checkpointing_enable()
    else:
        model.eval()
    return model


def build_optimizer(model: torch.nn.Module, settings: PlanSettings) -> torch.optim.Optimizer:
    """The optimizer as torch builds it for a Neuron tensor: ``foreach`` is torch's default on an accelerator
    (and on TorchNeuron's PrivateUse1 device), not on the CPU the fake tensors claim, and foreach AdamW holds a
    parameter-sized temporary during ``step``, so the plan asks for it explicitly.

    A tensor-parallel model mixes DTensor parameters (the sharded layers) with plain ones (the norms), and a
    ``foreach`` op refuses such a mix, so each kind gets its own parameter group; the step's temporary is then
    per group, smaller by the plain parameters' share (the norms: well under 1% of a Llama)."""
    from torch.distributed.tensor import DTensor

    params = [p for p in model.parameters() if p.requires_grad]
    kinds = [[p for p in params if isinstance(p, DTensor)], [p for p in params if not isinstance(p, DTensor)]]
    groups: list[dict[str, Any]] = [{"params": kind} for kind in kinds if kind]
    if settings.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=1e-3, foreach=True)
    return torch.optim.AdamW(groups, foreach=True)


def input_ids(config: Any, settings: PlanSettings, device: str | torch.device) -> torch.Tensor:
    """A batch of token ids of the planned shape (the labels are the same tensor, as a causal-LM step uses)."""
    return torch.randint(0, int(config.vocab_size), (settings.batch_size, settings.seq_len), device=device)


def autocast(settings: PlanSettings, device_type: str) -> Any:
    """The autocast region the forward runs in (a no-op without ``--autocast``)."""
    return torch.autocast(device_type, dtype=torch.bfloat16, enabled=settings.autocast == "bf16")


def train_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    ids: torch.Tensor,
    settings: PlanSettings,
    after: Callable[[str], None],
) -> None:
    """Forward (with the loss), backward, optimizer step; ``after(phase)`` is called as each phase ends."""
    with autocast(settings, ids.device.type):
        loss = model(input_ids=ids, labels=ids).loss
    after("forward")
    loss.backward()
    del loss
    after("backward")
    optimizer.step()
    after("optimizer")


def generate_step(
    model: torch.nn.Module, config: Any, ids: torch.Tensor, settings: PlanSettings, after: Callable[[str], None]
) -> Any:
    """Prefill the prompt into a static cache of ``seq_len + max_new_tokens`` positions, then decode one token;
    the cache is returned so its size can be reported."""
    from transformers import StaticCache

    cache = StaticCache(config=config, max_cache_len=settings.seq_len + settings.max_new_tokens)
    with torch.no_grad(), autocast(settings, ids.device.type):
        logits = model(input_ids=ids, past_key_values=cache, use_cache=True).logits
        after("prefill")
        token = logits[:, -1:].argmax(-1)
        del logits
        position = torch.full((1,), settings.seq_len, device=ids.device, dtype=torch.long)
        model(input_ids=token, past_key_values=cache, use_cache=True, cache_position=position)
        after("decode")
    return cache
