"""FSDP2 ``fully_shard`` of a model loaded on the CPU, with BatchNorm buffers (issue 33).

``fully_shard`` moves every CPU parameter and buffer to the rank's core in ``_move_states_to_device``
with ``tensor.data = tensor.to(device)``, which stock torch refuses between the CPU and any PrivateUse1
device. With the shim (patch ``cross_device_data``) they are swapped onto the core instead: the same
Python objects, on ``neuron:{LOCAL_RANK}``, with their values. Two training steps then run.
"""

import json
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

dist.init_process_group(backend="neuron")
rank = dist.get_rank()
torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
batchnorm = model[1]
with torch.no_grad():
    batchnorm.running_mean.fill_(0.5)
buffers = {name: buffer for name, buffer in batchnorm.named_buffers()}
before = {name: buffer.clone() for name, buffer in buffers.items()}
fully_shard(model)
moved = {name: buffer.cpu() for name, buffer in buffers.items()}

optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    model(torch.randn(6, 4, device="neuron")).pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()

result = {
    "rank": rank,
    "buffer_devices": sorted({str(b.device) for b in batchnorm.buffers()}),
    "param_devices": sorted({str(p.to_local().device) for p in model.parameters()}),
    "same_buffer_objects": all(getattr(batchnorm, name) is buffer for name, buffer in buffers.items()),
    "moved_values_kept": all(torch.equal(moved[name], before[name]) for name in buffers),
    "running_mean_updated": not torch.equal(batchnorm.running_mean.cpu(), before["running_mean"]),
    "num_batches_tracked": int(batchnorm.num_batches_tracked.item()),
}
print("RESULT " + json.dumps(result), flush=True)
dist.destroy_process_group()
