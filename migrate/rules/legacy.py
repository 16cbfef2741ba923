"""The hooks the legacy-Neuron families share: statement pruning and the import rewrite.

Optimum Neuron (NM5xx) and torch_xla (NM6xx) scripts are ported by swapping names
(`optimum.neuron.NeuronTrainer` -> `transformers.Trainer`, the table in `legacy_names`) and
deleting calls that have no native meaning (`xm.mark_step()`). Both need work the single
rewriting traversal cannot do node by node, so this family runs it when blocks are left:

- statements a family marked `@removable` are pruned when their block is left, their
  comments kept (`removal`);
- the legacy imports are rewritten once, when the module is left and the tree is final
  (`legacy_imports`).

Its hooks stand before the Optimum Neuron and torch_xla families in `migrate.rule_families.FAMILIES`.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import on
from migrate.rules.legacy_imports import rewrite_imports
from migrate.rules.removal import is_bare_pass, prune

RULES: tuple[Rule, ...] = ()  # no rules of its own: its hooks prune what the Optimum Neuron and torch_xla families mark


@on("IndentedBlock")
def prune_block(node: cst.IndentedBlock, ctx: FileContext) -> cst.IndentedBlock:
    pruned = prune(node.body, ctx)
    if pruned is None:
        return node
    return node.with_changes(body=pruned)


@on("Module")
def legacy_module(node: cst.Module, ctx: FileContext) -> cst.Module:
    """Prune the module body, then rewrite legacy imports against the final tree."""
    pruned = prune(node.body, ctx)
    if pruned is not None:
        node = node.with_changes(body=[s for s in pruned if not is_bare_pass(s)])
    return rewrite_imports(node, ctx)
