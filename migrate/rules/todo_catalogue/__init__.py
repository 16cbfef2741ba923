"""The TODO catalogue: the TODO rules several families leave, each a `Rule` with its fixed `message`.

Moved whole into `cuda` so that the split into one module per sub-topic keeps its history.
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.todo_catalogue import cuda
from migrate.rules.todo_catalogue.cuda import (
    BNB_LEFT,
    CUDA_ONLY_BLOCK,
    CUDA_ONLY_NAMES,
    CUDA_RUNTIME_MESSAGES,
    MESSAGES,
    REMOVED_TRL_API,
    SHAPE_LOOP,
    TP_ADVICE,
    TP_LAUNCH,
    attach,
    flatten,
    leftover_rule,
    quantized_load_message,
    todo,
)

RULES: tuple[Rule, ...] = cuda.RULES

__all__ = [
    "RULES",
    "TP_ADVICE",
    "CUDA_ONLY_BLOCK",
    "CUDA_ONLY_NAMES",
    "BNB_LEFT",
    "SHAPE_LOOP",
    "TP_LAUNCH",
    "CUDA_RUNTIME_MESSAGES",
    "MESSAGES",
    "REMOVED_TRL_API",
    "quantized_load_message",
    "todo",
    "leftover_rule",
    "attach",
    "flatten",
]
