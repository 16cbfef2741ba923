"""Load a causal LM with ``DistributedConfig(tp_size=N)`` and decode greedily.

Prints, per rank, how one attention projection is sharded and the generated token ids.
Usage: ``torchrun --nproc_per_node=2 tp_generate.py MODEL_DIR "prompt" MAX_NEW_TOKENS``
"""

import json
import os
import sys

import torch.distributed as dist
from torch.distributed.tensor import DTensor
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.distributed import DistributedConfig

path, prompt, new_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = AutoModelForCausalLM.from_pretrained(
    path, distributed_config=DistributedConfig(tp_size=int(os.environ["WORLD_SIZE"]))
)
weight = model.model.layers[0].self_attn.q_proj.weight
tokenizer = AutoTokenizer.from_pretrained(path)
output = model.generate(**tokenizer(prompt, return_tensors="pt"), max_new_tokens=new_tokens, do_sample=False)
print(
    "RESULT "
    + json.dumps(
        {
            "rank": dist.get_rank(),
            "sharded": isinstance(weight, DTensor),
            "local_shape": list(weight.to_local().shape) if isinstance(weight, DTensor) else list(weight.shape),
            "full_shape": list(weight.shape),
            "device": str(weight.to_local().device if isinstance(weight, DTensor) else weight.device),
            "ids": output[0].tolist(),
        }
    ),
    flush=True,
)
