"""The torch_xla names the family acts on, in one place: device and sync calls, rank helpers and the
environment variable each becomes, reduce ops, spawn and loader entry points, the XLA environment variables, and
the patterns that tell a multi-process or already-reduced script (NM601: their imports go with them).
"""

from __future__ import annotations

import re

from migrate.registry import Rule

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM601",
        name="xla-imports",
        safety="safe",
        summary="`torch_xla` imports go once nothing uses them.",
        rationale="torch_xla is not installed with TorchNeuron (and must not be: transformers then "
        "takes its XLA code paths). Imports are dropped after the NM6xx rewrites, including "
        "side-effect imports such as `torch_xla.distributed.xla_backend`; one that is still used "
        "stays with TODO NM918. This rule does the dropping, so with only another NM6xx rule "
        "selected the unused import is left in place (as the examples of those rules show).",
        before="import torch\nimport torch_xla\nimport torch_xla.distributed.xla_backend\nx = torch.ones(2)\n",
        after="import torch\nx = torch.ones(2)\n",
    ),
)

XM = "torch_xla.core.xla_model."
_DEVICE = {XM + "xla_device", "torch_xla.device"}
_SYNC = {XM + "mark_step", "torch_xla.sync", XM + "wait_device_ops"}
_METRICS = {"torch_xla.debug.metrics.metrics_report", "torch_xla.debug.metrics.short_metrics_report"}
_RANK = {
    XM + "get_ordinal": "RANK",
    "torch_xla.runtime.global_ordinal": "RANK",
    XM + "get_local_ordinal": "LOCAL_RANK",
    "torch_xla.runtime.local_ordinal": "LOCAL_RANK",
    XM + "xrt_world_size": "WORLD_SIZE",
    "torch_xla.runtime.world_size": "WORLD_SIZE",
}
_REDUCE_OPS = {
    "REDUCE_SUM": "SUM",
    "REDUCE_MAX": "MAX",
    "REDUCE_MIN": "MIN",
    "REDUCE_MUL": "PRODUCT",
    "sum": "SUM",
    "max": "MAX",
    "min": "MIN",
    "mul": "PRODUCT",
}
_SPAWN = {"torch_xla.distributed.xla_multiprocessing.spawn", "torch_xla.launch"}
_LOADER = "torch_xla.distributed.parallel_loader."
# Handled where the whole statement is seen (or by a parent call), not as a bare call.
_STATEMENT_LEVEL = {
    XM + "master_print",
    XM + "save",
    XM + "all_reduce",
    XM + "rendezvous",
    XM + "reduce_gradients",
    _LOADER + "ParallelLoader",
    *_SYNC,
    *_METRICS,
    *_SPAWN,
}
_BF16_ENV = ("XLA_USE_BF16", "XLA_DOWNCAST_BF16")
_XLA_ENV = (*_BF16_ENV, "PJRT_DEVICE", "XLA_IR_DEBUG", "XLA_HLO_DEBUG", "XLA_USE_32BIT_LONG", "XLA_SAVE_TENSORS_FILE")
_MULTI = re.compile(
    r"xla_multiprocessing|\bxmp\.spawn|torch_xla\.launch|world_size|get_ordinal|global_ordinal|init_process_group"
)
_COLLECTIVES = re.compile(
    r"\bxm\.(?:all_reduce|rendezvous|all_gather|reduce_scatter)\b|DistributedDataParallel|\bDDP\("
)
_REDUCED = re.compile(r"DistributedDataParallel|\bDDP\(|\bfully_shard\b|(?<!Xla)FullyShardedDataParallel")
