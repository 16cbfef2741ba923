"""FSDP2 with meta-device init: build on ``meta``, shard, ``to_empty(device="neuron")``, re-initialise.

The way large-model recipes start FSDP2 (torchtitan, accelerate's ``cpu_ram_efficient_loading``):
no rank ever holds the full model. ``reset_parameters()`` then runs random ops on sharded
DTensors, which go through DTensor's RNG tracker and the device's (seed, offset) RNG state.
Two steps on different data per rank must end where one CPU process ends from the same initial
weights with the concatenated batch. Rank 0 trains that reference.
"""

import json
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

dist.init_process_group(backend="neuron")
rank, world = dist.get_rank(), dist.get_world_size()
torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))


def build() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def batches(r: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(100 + r)
    return [torch.randn(4, 8, generator=generator) for _ in range(2)]


def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor) -> None:
    model(x).pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()


torch.manual_seed(0)
with torch.device("meta"):
    model = build()
mesh = init_device_mesh("neuron", (world,))
for layer in model:
    if isinstance(layer, torch.nn.Linear):
        fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
model.to_empty(device="neuron")
for module in model.modules():
    if isinstance(module, torch.nn.Linear):
        module.reset_parameters()
initial = [p.full_tensor().detach().cpu() for p in model.parameters()]
optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
for x in batches(rank):
    step(model, optimizer, x.to("neuron"))
full = [p.full_tensor().detach().cpu() for p in model.parameters()]

weight = initial[0]
result = {
    "rank": rank,
    "device": str(next(model.parameters()).to_local().device),
    "local_shapes": [list(p.to_local().shape) for p in model.parameters()],
    "shards_differ": not torch.equal(weight[: weight.shape[0] // 2], weight[weight.shape[0] // 2 :]),
    "initial_finite": all(bool(torch.isfinite(p).all()) for p in initial),
    "trained": any(not torch.equal(a, b) for a, b in zip(initial, full)),
}
if rank == 0:
    reference = build()
    with torch.no_grad():
        for p, value in zip(reference.parameters(), initial):
            p.copy_(value)
    ref_optimizer = torch.optim.AdamW(reference.parameters(), lr=0.05)
    for xs in zip(*(batches(r) for r in range(world))):
        step(reference, ref_optimizer, torch.cat(xs))
    result["max_diff_vs_cpu"] = max((a - b).abs().max().item() for a, b in zip(full, reference.parameters()))
print("RESULT " + json.dumps(result), flush=True)
dist.destroy_process_group()
