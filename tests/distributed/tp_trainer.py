"""Tensor-parallel training through the Trainer: ``DistributedConfig(tp_size=2)``, 2 steps, save.

The saved model must load on CPU in one process with the full (unsharded) shapes. Each rank
prints one JSON line. Usage: ``torchrun --nproc_per_node=2 tp_trainer.py MODEL_DIR OUTPUT_DIR``
"""

import json
import os
import sys

import torch.distributed as dist
from datasets import Dataset
from torch.distributed.tensor import DTensor
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainingArguments,
)
from transformers.distributed import DistributedConfig

path, out = sys.argv[1], sys.argv[2]
tokenizer = AutoTokenizer.from_pretrained(path)
tp = DistributedConfig(tp_size=int(os.environ["WORLD_SIZE"]))
model = AutoModelForCausalLM.from_pretrained(path, distributed_config=tp)
texts = [f"the neuron core compiles a graph for every new shape {i}" for i in range(8)]
data = Dataset.from_dict(tokenizer(texts))
args = TrainingArguments(
    output_dir=out,
    max_steps=2,
    per_device_train_batch_size=2,
    learning_rate=1e-3,
    report_to=[],
    logging_steps=1,
    save_strategy="no",
    seed=0,
)
trainer = Trainer(
    model=model, args=args, train_dataset=data, data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False)
)
trainer.train()
trainer.save_model(os.path.join(out, "final"))
weight = model.model.layers[0].self_attn.q_proj.weight
print(
    "RESULT "
    + json.dumps(
        {
            "rank": dist.get_rank(),
            "sharded": isinstance(weight, DTensor),
            "device": str(weight.to_local().device if isinstance(weight, DTensor) else weight.device),
            "losses": [row["loss"] for row in trainer.state.log_history if "loss" in row],
        }
    ),
    flush=True,
)
