"""An accelerate training loop (``Accelerator.prepare``) on a rank-sharded dataloader.

Prints the distributed type and device accelerate chose, and a digest of the trained weights:
equal digests on every rank mean accelerate's DDP really averaged the gradients.
"""

import hashlib
import json

import torch
from accelerate import Accelerator

accelerator = Accelerator()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
data = torch.utils.data.TensorDataset(torch.randn(32, 8), torch.randn(32, 1))
loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True)
optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
first_batch = None
for x, y in loader:
    first_batch = first_batch if first_batch is not None else x.sum().item()
    loss = torch.nn.functional.mse_loss(model(x), y)
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
digest = hashlib.sha256()
for p in accelerator.unwrap_model(model).parameters():
    digest.update(p.detach().cpu().numpy().tobytes())
print(
    "RESULT "
    + json.dumps(
        {
            "rank": accelerator.process_index,
            "distributed_type": str(accelerator.distributed_type),
            "device": str(accelerator.device),
            "param_device": str(next(model.parameters()).device),
            "first_batch": first_batch,
            "digest": digest.hexdigest(),
        }
    ),
    flush=True,
)
accelerator.end_training()
