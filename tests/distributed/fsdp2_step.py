"""Two FSDP2 (``fully_shard``) steps on different data per rank, against the same steps on CPU.

FSDP2 averages gradients over ranks, so two ranks with batches of 4 must end with the weights
one process gets from the concatenated batch of 8. Rank 0 trains that reference on CPU.
"""

import json
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

dist.init_process_group(backend="neuron")
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))


def build() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def batches(r: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(100 + r)
    return [torch.randn(4, 8, generator=generator) for _ in range(2)]


def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor) -> None:
    model(x).pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()


mesh = init_device_mesh("neuron", (world,))
model = build().to(device)
for layer in model:
    if isinstance(layer, torch.nn.Linear):
        fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
for x in batches(rank):
    step(model, optimizer, x.to(device))
local = [list(p.to_local().shape) for p in model.parameters()]
full = [p.full_tensor().detach().cpu() for p in model.parameters()]

result = {"rank": rank, "local_shapes": local, "device": str(next(model.parameters()).to_local().device)}
if rank == 0:
    reference = build()
    ref_optimizer = torch.optim.AdamW(reference.parameters(), lr=0.05)
    for xs in zip(*(batches(r) for r in range(world))):
        step(reference, ref_optimizer, torch.cat(xs))
    result["max_diff_vs_cpu"] = max((a - b).abs().max().item() for a, b in zip(full, reference.parameters()))
print("RESULT " + json.dumps(result), flush=True)
dist.destroy_process_group()
