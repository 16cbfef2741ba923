"""Every collective a training stack uses, on neuron tensors; rank results as one JSON line."""

import json
import os

import torch
import torch.distributed as dist

dist.init_process_group(backend="neuron")
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
results: dict[str, object] = {"device": str(torch.ones(1, device=device).device), "backend": dist.get_backend()}


def full(value: float, n: int = 2, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.full((n,), value, device=device, dtype=dtype)


t = full(rank + 1.0)
dist.all_reduce(t)
results["all_reduce"] = t.cpu().tolist()
t = (torch.arange(4.0, device=device).reshape(2, 2) + rank).t()  # a non-contiguous view
dist.all_reduce(t)
results["all_reduce_transposed"] = t.cpu().tolist()
t = full(rank + 1.0, dtype=torch.bfloat16)
dist.all_reduce(t, op=dist.ReduceOp.AVG)
results["all_reduce_avg_bf16"] = t.float().cpu().tolist()
t = full(rank + 1.0)
dist.all_reduce(t, op=dist.ReduceOp.MAX)
results["all_reduce_max"] = t.cpu().tolist()
out = torch.empty(2 * world, device=device)
dist.all_gather_into_tensor(out, full(float(rank)))
results["all_gather_into_tensor"] = out.cpu().tolist()
outs = [torch.empty(2, device=device) for _ in range(world)]
dist.all_gather(outs, full(float(rank)))
results["all_gather"] = [o.cpu().tolist() for o in outs]
o = torch.empty(2, device=device)
dist.reduce_scatter_tensor(o, torch.arange(2.0 * world, device=device) * (rank + 1))
results["reduce_scatter_tensor"] = o.cpu().tolist()
o = torch.empty(2, device=device)
dist.reduce_scatter(o, [full(10.0 * i + rank) for i in range(world)])
results["reduce_scatter"] = o.cpu().tolist()
b = full(float(rank), 3)
dist.broadcast(b, src=1)
results["broadcast"] = b.cpu().tolist()
o = torch.empty(world, device=device)
dist.all_to_all_single(o, torch.arange(world, device=device, dtype=torch.float32) + 10 * rank)
results["all_to_all_single"] = o.cpu().tolist()
objects = [{"from": 0}] if rank == 0 else [None]
dist.broadcast_object_list(objects, src=0)
results["broadcast_object_list"] = objects
gathered: list[object] = [None] * world
dist.all_gather_object(gathered, {"rank": rank})
results["all_gather_object"] = gathered
if rank == 0:
    dist.send(full(7.0), dst=1)
elif rank == 1:
    r = torch.empty(2, device=device)
    dist.recv(r, src=0)
    results["recv"] = r.cpu().tolist()
dist.barrier()
print("RESULT " + json.dumps({"rank": rank, **results}), flush=True)
dist.destroy_process_group()
