"""accelerate ``save_state`` then ``load_state`` under ``accelerate launch``, and Trainer resume.

Part 1: two steps with accelerate, ``save_state``; the weights are then perturbed and
``load_state`` must restore them exactly (safetensors reads each tensor's ``data_ptr()``).
With more than one process accelerate loads ``on_device`` by default, which safetensors' Rust core
rejects for any device it does not know ("device neuron:0 is invalid"), on a trn2 as here; the
shim's ``safetensors_load`` patch reads the file on the CPU instead. The script records any error of
the default load and whether it restored the weights, then loads again with ``map_location="cpu"``.
Part 2: a Trainer run of 4 steps saving a checkpoint at step 2; a second Trainer resumes from it
(``resume_from_checkpoint``) and must end with the weights of the uninterrupted run.
Each rank prints one JSON line.
"""

import json
import sys
from pathlib import Path

import torch
from accelerate import Accelerator
from transformers import Trainer, TrainingArguments

import neuroncompat  # noqa: F401  (migrated scripts import it; each rank starts the simulator)

out = Path(sys.argv[1])
accelerator = Accelerator()
rank = accelerator.process_index


def build() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


model = build()
optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
model, optimizer = accelerator.prepare(model, optimizer)
for step in range(2):
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(10 * rank + step)).to(accelerator.device)
    accelerator.backward(model(x).pow(2).mean())
    optimizer.step()
    optimizer.zero_grad()
accelerator.save_state(str(out / "accelerate_state"))
accelerator.wait_for_everyone()
saved = {k: v.detach().cpu().clone() for k, v in accelerator.unwrap_model(model).state_dict().items()}
with torch.no_grad():
    for p in model.parameters():
        p.add_(1.0)
try:
    accelerator.load_state(str(out / "accelerate_state"))
    on_device_error = None
except Exception as error:  # noqa: BLE001 (the message is the result)
    on_device_error = str(error)
state = accelerator.unwrap_model(model).state_dict()
on_device_exact = all(torch.equal(saved[k], v.detach().cpu()) for k, v in state.items())
with torch.no_grad():
    for p in model.parameters():
        p.add_(1.0)
accelerator.load_state(str(out / "accelerate_state"), map_location="cpu")
restored = accelerator.unwrap_model(model).state_dict()
result = {
    "rank": rank,
    "device": str(accelerator.device),
    "on_device_error": on_device_error,
    "on_device_exact": on_device_exact,
    "load_state_exact": all(torch.equal(saved[k], v.detach().cpu()) for k, v in restored.items()),
}


class Regression(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = build()

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": torch.nn.functional.mse_loss(self.net(x).squeeze(-1), labels)}


data = [
    {"x": torch.randn(8, generator=torch.Generator().manual_seed(i)), "labels": torch.tensor(float(i % 3))}
    for i in range(32)
]


def train(run: str, resume: str | None = None) -> dict[str, torch.Tensor]:
    args = TrainingArguments(
        output_dir=str(out / run),
        max_steps=4,
        save_steps=2,
        per_device_train_batch_size=4,
        learning_rate=0.05,
        report_to=[],
        seed=0,
        logging_steps=1,
    )
    trainer = Trainer(model=Regression(), args=args, train_dataset=data)
    trainer.train(resume_from_checkpoint=resume)
    return {k: v.detach().cpu() for k, v in trainer.model.state_dict().items()}


full = train("trainer-full")
resumed = train("trainer-resumed", resume=str(out / "trainer-full" / "checkpoint-2"))
result["resume_exact"] = all(torch.equal(full[k], resumed[k]) for k in full)
print("RESULT " + json.dumps(result), flush=True)
