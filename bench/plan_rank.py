"""One rank of ``bench_plan.py --only tp`` and ``--only fsdp``: the planned step run for real, sharded, on the
simulated device.

``torchrun --nproc_per_node=N bench/plan_rank.py OUT_PREFIX SPEC`` with the simulator on (``NEURONCOMPAT_SIMULATE=1``);
SPEC is JSON: the Llama config's ``shape``, ``batch``, ``seq``, ``autocast`` (null or "bf16"), ``checkpointing``,
``tp`` and ``fsdp``. transformers sets up the process group and meshes as ``from_pretrained`` does for
``DistributedConfig(tp_size=tp, fsdp_size=fsdp)``, the model is built from the config and sharded by its TP and FSDP
plans (:func:`neuroncompat.plan.step.build_model`, the plan's own code), and each rank writes its peak by the end
of each phase (``max_memory_allocated`` of its own core) to ``OUT_PREFIX.RANK.json``.

With ``"release_collectives": true`` in SPEC the simulator's process group does not keep the last collective's
tensors alive until the next collective (neuroncompat/simulator/distributed.py keeps them, so that gloo's worker never
drops the last reference to one, which once hung a DDP job at exit): on hardware nothing holds a collective's buffers
after it completes, and under FSDP the kept one is the last reduce-scatter's input, a whole unsharded gradient
(bench/README.md, FSDP accuracy). A measurement switch only: the hang it guards against is rare, and a run that hangs
is ended by bench_plan.py's timeout.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import neuroncompat  # noqa: F401  (the shim and the simulated device, as a user's script starts them)


class _Released(dict):
    """A table of the last collectives that keeps none (``release_collectives``, above)."""

    def __setitem__(self, key: object, value: object) -> None:
        return None


def main() -> None:
    import torch.distributed as dist
    from transformers import LlamaConfig, PreTrainedModel
    from transformers.distributed import DistributedConfig

    from neuroncompat.plan.measure import measure
    from neuroncompat.plan.settings import PlanSettings

    prefix, spec = sys.argv[1], json.loads(sys.argv[2])
    if spec.get("release_collectives"):
        from neuroncompat.simulator import distributed

        distributed._last_collective = _Released()
    settings = PlanSettings(
        batch_size=spec["batch"],
        seq_len=spec["seq"],
        autocast=spec["autocast"],
        gradient_checkpointing=spec["checkpointing"],
    )
    distributed = DistributedConfig(tp_size=spec["tp"], fsdp_size=spec["fsdp"])
    config, _, meshes = PreTrainedModel.prepare_distribute_model(distributed)
    peaks = measure(LlamaConfig(**spec["shape"]), settings, int(os.environ["LOCAL_RANK"]), (config, meshes))
    Path(f"{prefix}.{dist.get_rank()}.json").write_text(json.dumps(peaks))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
