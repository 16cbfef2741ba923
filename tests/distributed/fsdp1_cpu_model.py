"""FSDP1 (``FullyShardedDataParallel`` with ``device_id``) of a model built on the CPU: one training step (issue 41).

FSDP1 moves the CPU model to the rank's core (``_move_states_to_device``), flattens its parameters into one
``FlatParameter`` and shards it: ``FlatParamHandle.shard()`` replaces the flat parameter's storage with its
shard by ``flat_param.set_(shard)``, which torch refuses when the two are on different devices. With the shim
(patch ``cross_device_data``) every tensor lands on ``neuron:{LOCAL_RANK}``. One SGD step on different data per
rank must then give the weights one process gets on the CPU from the concatenated batch (FSDP averages
gradients over ranks); rank 0 trains that reference.
"""

import json
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel

dist.init_process_group(backend="neuron")
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
torch.neuron.set_device(device)


def build() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def batch(r: int) -> torch.Tensor:
    return torch.randn(4, 8, generator=torch.Generator().manual_seed(100 + r))


def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor) -> float:
    loss = model(x).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


model = FullyShardedDataParallel(build(), device_id=device)  # built on the CPU, as loaded from a checkpoint
flat = [p for p in model.parameters()]
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss = step(model, optimizer, batch(rank).to(device))
with FullyShardedDataParallel.summon_full_params(model):
    full = [p.detach().cpu().clone() for p in model.module.parameters()]

result = {
    "rank": rank,
    "flat_param_devices": sorted({str(p.device) for p in flat}),
    "flat_param_numel": [p.numel() for p in flat],
    "loss_finite": bool(torch.isfinite(torch.tensor(loss))),
}
if rank == 0:
    reference = build()
    step(reference, torch.optim.SGD(reference.parameters(), lr=0.1), torch.cat([batch(r) for r in range(world)]))
    result["max_diff_vs_cpu"] = max((a - b).abs().max().item() for a, b in zip(full, reference.parameters()))
print("RESULT " + json.dumps(result), flush=True)
dist.destroy_process_group()
