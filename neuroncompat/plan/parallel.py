"""A parallel layout (tensor parallelism x FSDP) applied to the fake model as a training script applies it.

The layout is transformers' own: ``DistributedConfig(tp_size=..., fsdp_size=...)`` and the model's
``maybe_distribute_model``, which is what ``from_pretrained(distributed_config=...)`` runs (the seed guides' way
to shard a model on Neuron): the model's TP plan (``base_model_tp_plan``) with DTensor, then FSDP2's
``fully_shard`` by the model's FSDP plan. Nothing is computed by formula: the plan traces this rank's step.

The ranks are one process: torch's fake process group (``init_process_group("fake")``, public since torch 2.5)
answers every collective without communicating, so rank 0 of an N-rank job runs alone, with shapes only.

Two of torch's own paths need help on fake tensors, and only while a plan runs (:func:`_on_fake_tensors`):

- DTensor works out each op's output shape by running the op on global-shape fake tensors in the *active* fake
  mode; MemTracker counts every tensor made in the mode it was entered in, so those global-shape shadows were
  counted as this rank's memory (a 2-way FSDP AdamW step was planned at 60 MiB where it holds 29). The
  propagation gets a fake mode of its own, as it does in a real run.
- FSDP2 over a TP-sharded model joins the two meshes (``DeviceMesh._concatenate``), which computes the rank's
  coordinates with ``nonzero`` on the mesh tensor: a data-dependent op a fake tensor cannot run. The mesh is
  bookkeeping, not memory, so it is computed on real tensors.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from neuroncompat.plan.settings import PlanInputError


@dataclass(frozen=True)
class Layout:
    """``tp`` ranks share each layer (tensor parallelism), ``fsdp`` groups of them shard the model's states."""

    tp: int = 1
    fsdp: int = 1

    def __post_init__(self) -> None:
        for name, size in (("tp", self.tp), ("fsdp", self.fsdp)):
            if size < 1:
                raise PlanInputError(f"--{name} {size}: must be at least 1")

    @property
    def cores(self) -> int:
        return self.tp * self.fsdp

    def as_dict(self) -> dict[str, int]:
        return {"tp": self.tp, "fsdp": self.fsdp, "cores": self.cores}


def check(config: Any, layout: Layout) -> None:
    """Refuse a TP size the model's attention cannot be split by (each rank must hold whole heads)."""
    if layout.tp == 1:
        return
    for field in ("num_attention_heads", "num_key_value_heads"):
        heads = getattr(config, field, None)
        if isinstance(heads, int) and heads % layout.tp:
            raise PlanInputError(f"--tp {layout.tp}: the config's {field} ({heads}) is not a multiple of it")


@contextlib.contextmanager
def fake_world(layout: Layout) -> Iterator[Any]:
    """Rank 0 of a ``layout.cores``-rank fake process group and transformers' device meshes over it (None for
    one core); the group is destroyed on the way out, so a plan leaves no process group behind."""
    if layout.cores == 1:
        yield None
        return
    import torch.distributed as dist
    from transformers.distributed import DistributedConfig
    from transformers.distributed.utils import TransformersDeviceMesh

    if dist.is_initialized():
        raise PlanInputError("a torch.distributed process group is already initialised in this process")
    dist.init_process_group("fake", rank=0, world_size=layout.cores)
    try:
        config = DistributedConfig(tp_size=layout.tp, fsdp_size=layout.fsdp)
        # the meshes transformers' initialize_distributed_mesh builds, on the CPU the fake tensors claim
        dense = dist.init_device_mesh(
            "cpu", (1, 1, layout.fsdp, layout.tp), mesh_dim_names=("pp", "dp_replicate", "fsdp", "tp")
        )
        expert = dist.init_device_mesh(
            "cpu",
            (1, 1, int(config.efsdp_size), int(config.ep_size or 1)),
            mesh_dim_names=("pp", "dp_replicate", "efsdp", "ep"),
        )
        yield config, TransformersDeviceMesh(dense, expert)
    finally:
        dist.destroy_process_group()


def distribute(model: Any, world: Any, fsdp: bool = True) -> Any:
    """``model`` sharded by transformers' TP and FSDP plans, as ``from_pretrained(distributed_config=...)`` does;
    with ``fsdp`` False by its TP plan alone (a LoRA plan shards the states once peft has added the adapters,
    :func:`shard_states`)."""
    if world is None:
        return model
    config, meshes = world
    if not fsdp:
        from transformers.distributed import DistributedConfig

        config = DistributedConfig(tp_size=config.tp_size)
    try:
        return type(model).maybe_distribute_model(model, config, meshes)
    except ValueError as exc:  # a model with no TP or FSDP plan: transformers names what is missing
        raise PlanInputError(f"transformers cannot shard this model: {exc}") from exc


def shard_states(model: Any, world: Any) -> None:
    """FSDP2 over ``model`` (a transformers model its TP plan already sharded) by transformers' FSDP plan, as
    :func:`distribute` would have applied it: what a LoRA plan does after peft has added the adapters, so that
    FSDP shards them with the frozen base (accelerate's FSDP2 path wraps a peft model the same way, after peft).
    Nothing for one core or no FSDP."""
    if world is None or world[0].dp_size == 1:
        return
    from transformers.distributed.fsdp import apply_fully_sharded_data_parallelism

    config, meshes = world
    model.config.distributed_config = config
    _, _, fsdp_plan = model._resolve_parallel_plans(config)
    apply_fully_sharded_data_parallelism(model, meshes, fsdp_plan, {})


@contextlib.contextmanager
def on_fake_tensors() -> Iterator[None]:
    """DTensor's shape propagation in a fake mode of its own, and device meshes joined on real tensors (above)."""
    from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily
    from torch.distributed import device_mesh
    from torch.distributed.tensor import _sharding_prop

    concatenate = device_mesh.DeviceMesh._concatenate

    def joined_on_real_tensors(meshes: list[Any]) -> Any:
        with unset_fake_temporarily():
            return concatenate(meshes)

    detect = _sharding_prop.detect_fake_mode
    _sharding_prop.detect_fake_mode = lambda *args: FakeTensorMode()
    setattr(device_mesh.DeviceMesh, "_concatenate", staticmethod(joined_on_real_tensors))  # noqa: B010
    try:
        yield
    finally:
        _sharding_prop.detect_fake_mode = detect
        setattr(device_mesh.DeviceMesh, "_concatenate", staticmethod(concatenate))  # noqa: B010
