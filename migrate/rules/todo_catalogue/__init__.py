"""The TODO catalogue: the TODO rules several families leave, each a `Rule` with its fixed `message`.

A TODO rule annotates instead of rewriting: `# TODO(neuron-migrate NM9xx): message` goes above
the statement, the code stays as it is (still valid Python), and the report lists each TODO with
file:line. A TODO is added once per statement and rule, so reruns are no-ops. The families that
detect the constructs (`todo` for CUDA-only packages and APIs, `optimum_training`,
`optimum_inference`, `xla`, `compile_env`, `tensor_parallel`, `quantization`, and the YAML/shell
migrators) all take their words from here, so each family can leave a TODO without depending on
another family's hooks. A TODO is emitted whether or not the rewrite next to it is enabled:
`--select NM912` alone still marks every ZeRO-1 flag.

Fix safety: annotating is safe, except where the TODO also replaces a call that raises without
CUDA (NM904): the replacement value decides which branch the script takes.

One module per kind of construct (`cuda`: CUDA-only packages and runtime APIs; `optimum_xla`: what Optimum
Neuron and torch_xla scripts keep; `libraries`: what transformers, TRL, the Hub and diffusers changed), and
`leave` for how a TODO is worded and placed.
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.todo_catalogue import cuda, libraries, optimum_xla
from migrate.rules.todo_catalogue.cuda import BNB_LEFT, CUDA_ONLY_BLOCK, CUDA_ONLY_NAMES, CUDA_RUNTIME_MESSAGES
from migrate.rules.todo_catalogue.leave import MESSAGES, REMOVED_TRL_API, attach, flatten, quantized_load_message, todo
from migrate.rules.todo_catalogue.libraries import SHAPE_LOOP
from migrate.rules.todo_catalogue.optimum_xla import TP_ADVICE, TP_LAUNCH, leftover_rule

RULES: tuple[Rule, ...] = (
    *cuda.RULES,
    *optimum_xla.RULES,
    *libraries.RULES,
)

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
