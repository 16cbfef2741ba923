"""What a rank sees: its own core for an index-less ``neuron``, and gathers of non-flat tensors.

After ``torch.neuron.set_device(LOCAL_RANK)``, ``.to("neuron")``, ``model.to("neuron")``,
``torch.tensor(..., device="neuron")``, factories (also under ``with torch.device("neuron")``),
streams, device generators and ``torch.accelerator`` all mean the rank's core, as on a trn2;
``torch.accelerator.synchronize()`` returns.

TRL's GRPO/RLOO gather per-completion rewards of shape ``[batch, 1]`` and the RewardTrainer its
metrics with accelerate's ``gather`` (``all_gather_into_tensor`` into a ``[world * batch, 1]``
buffer); ``all_gather_into_tensor`` also takes a stacked ``[world, *shape]`` output. Each
rank prints one JSON line.
"""

import json
import os

import torch
import torch.distributed as dist
from accelerate import PartialState
from accelerate.utils import gather

state = PartialState()
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
torch.neuron.set_device(device)
results: dict[str, object] = {"rank": rank, "device": str(state.device)}
results["index_less"] = {
    "tensor_to": str(torch.ones(2).to("neuron").device),
    "module_to": str(torch.nn.Linear(2, 2).to("neuron").weight.device),
    "factory": str(torch.ones(2, device="neuron").device),
    "tensor_ctor": str(torch.tensor([1.0], device="neuron").device),
    "accelerator_index": torch.accelerator.current_device_index(),
    "stream_index": torch.neuron.current_stream().device_index,
    "generator": str(torch.Generator(device="neuron").device),
}
with torch.device("neuron"):
    results["index_less"]["tensor_ctor_in_device_context"] = str(torch.tensor([1.0]).device)
torch.accelerator.synchronize()
reduced = torch.full((2,), rank + 1.0).to("neuron")
dist.all_reduce(reduced)
results["all_reduce_of_index_less"] = reduced.cpu().tolist()


def ranked(*shape: int) -> torch.Tensor:
    """A tensor of ``shape`` whose values say which rank and position they came from."""
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.float32) + 100 * rank).reshape(shape).to(device)


results["accelerate_gather"] = gather(ranked(2, 1)).cpu().tolist()
out = torch.empty(2 * world, 1, device=device)
dist.all_gather_into_tensor(out, ranked(2, 1))
results["all_gather_into_tensor"] = out.cpu().tolist()
stacked = torch.empty(world, 2, 3, device=device)
dist.all_gather_into_tensor(stacked, ranked(2, 3))
results["all_gather_into_tensor_stacked"] = stacked.cpu().tolist()
outs = [torch.empty(2, 3, device=device) for _ in range(world)]
dist.all_gather(outs, ranked(2, 3))
results["all_gather"] = [o.cpu().tolist() for o in outs]
o = torch.empty(1, 2, device=device)
dist.reduce_scatter_tensor(o, ranked(world, 2))
results["reduce_scatter_tensor"] = o.cpu().tolist()
gathered = [torch.empty(2, 2, device=device) for _ in range(world)] if rank == 0 else None
dist.gather(ranked(2, 2), gathered, dst=0)
if rank == 0:
    results["gather"] = [g.cpu().tolist() for g in gathered]
print("RESULT " + json.dumps(results), flush=True)
dist.destroy_process_group()
