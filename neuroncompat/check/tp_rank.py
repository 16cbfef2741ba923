"""One rank of ``neuroncompat check --tensor-parallel``: the tiny model split over 2 ranks, as a user's script does.

``torchrun --nproc_per_node=2 -m neuroncompat.check.tp_rank MODEL_DIR OUT_PREFIX`` (the check's worker starts it
with the simulator on: each rank on ``neuron:{LOCAL_RANK}``, collectives through the ``neuron`` process group).
The model loads with ``DistributedConfig(tp_size=2)`` (transformers' own plan, the config's ``base_model_tp_plan``),
decodes the worker's prompt greedily and takes one training step on its batch, from the worker's seed; each rank
writes what it saw to ``OUT_PREFIX.RANK.json`` for the worker to compare with the CPU.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

import neuroncompat  # noqa: F401  (the shim, as a user's script starts it)


def main() -> None:
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor
    from transformers import AutoModelForCausalLM
    from transformers.distributed import DistributedConfig

    from neuroncompat.check.worker import _SEED, NEW_TOKENS, PROMPT_TOKENS, _batch

    directory, prefix = sys.argv[1], sys.argv[2]
    device = f"neuron:{os.environ['LOCAL_RANK']}"
    model = AutoModelForCausalLM.from_pretrained(directory, distributed_config=DistributedConfig(tp_size=2))
    parameters = list(model.parameters())
    local = [p.to_local() if isinstance(p, DTensor) else p for p in parameters]
    result: dict[str, Any] = {
        "rank": dist.get_rank(),
        "sharded": sum(isinstance(p, DTensor) for p in parameters),
        "parameters": len(parameters),
        "devices": sorted({str(p.device) for p in local}),
    }
    prompt = _batch()[:1, :PROMPT_TOKENS].to(device)
    result["tokens"] = model.eval().generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False)[0].tolist()
    model.train()
    torch.manual_seed(_SEED)
    ids = _batch().to(device)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    grads = [p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad for p in parameters if p.grad is not None]
    result["loss"] = float(loss.detach().float().cpu())
    result["grad_norm"] = float(torch.stack([g.detach().float().norm() for g in grads]).norm().cpu())
    Path(f"{prefix}.{result['rank']}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
