"""One rank of ``bench_plan.py --only tp``: the planned step run for real with TP=2 on the simulated device.

``torchrun --nproc_per_node=2 bench/plan_tp_rank.py OUT_PREFIX AUTOCAST CHECKPOINTING`` with the simulator on
(``NEURONCOMPAT_SIMULATE=1``): transformers sets up the process group and meshes as ``from_pretrained`` does for
``DistributedConfig(tp_size=2)``, the model is built from the 4-layer hidden-256 config and sharded by its TP plan
(:func:`neuroncompat.plan.step.build_model`, the plan's own code), and each rank writes its peak by the end of
each phase (``max_memory_allocated`` of its own core) to ``OUT_PREFIX.RANK.json``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import neuroncompat  # noqa: F401  (the shim and the simulated device, as a user's script starts them)

SHAPE = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 1000}  # fmt: skip


def main() -> None:
    import torch.distributed as dist
    from transformers import LlamaConfig, PreTrainedModel
    from transformers.distributed import DistributedConfig

    from neuroncompat.plan.measure import measure
    from neuroncompat.plan.settings import PlanSettings

    prefix, autocast, checkpointing = sys.argv[1], sys.argv[2], sys.argv[3] == "on"
    settings = PlanSettings(
        batch_size=2, seq_len=128, autocast=None if autocast == "-" else autocast, gradient_checkpointing=checkpointing
    )
    config, _, meshes = PreTrainedModel.prepare_distribute_model(DistributedConfig(tp_size=2))
    peaks = measure(LlamaConfig(**SHAPE), settings, int(os.environ["LOCAL_RANK"]), (config, meshes))
    Path(f"{prefix}.{dist.get_rank()}.json").write_text(json.dumps(peaks))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
