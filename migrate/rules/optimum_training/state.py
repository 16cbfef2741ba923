"""What the family's hooks share about a file: the Optimum names bound in it, the `trn_config`
variables, the precompilation checks seen, so a later hook acts on what an earlier one found.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.rules.base import (
    family_state,
)
from migrate.rules.legacy_names import resolve


@dataclass
class _State:
    tp: cst.BaseExpression | None = None  # tensor_parallel_size of the last training-arguments call
    distributed: set[str] = field(default_factory=set)  # names bound to a DistributedConfig(...)
    cli_config: set[str] = field(default_factory=set)  # names bound to `<args>.trn_config`
    # the `False` nodes that replaced is_precompilation(), by id (held, so no other node reuses the id)
    precompilation: dict[int, cst.Name] = field(default_factory=dict)
    # fields dropped from the training-arguments call of the current statement, and, once it is
    # bound (`training_args = NeuronTrainingArguments(...)`), per name: field -> the value it had
    dropped: dict[str, cst.BaseExpression] = field(default_factory=dict)
    removed_fields: dict[str, dict[str, cst.BaseExpression]] = field(default_factory=dict)


def _state(ctx: FileContext) -> _State:
    return family_state(ctx, "optimum-training", _State)


def _is_one(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Integer and node.value == "1"


def _qualified_name(node: cst.BaseExpression, ctx: FileContext) -> str:
    """`NeuronTrainer` when `node` resolves to an Optimum name with a swap; else ''."""
    qualified = ctx.qualify(node)
    return qualified.rpartition(".")[2] if qualified is not None and resolve(qualified) is not None else ""
