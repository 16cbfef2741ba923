"""NM508: Optimum's utilities with a native counterpart or none: the SDK patching call goes, and a
branch on `is_precompilation()` keeps only the code a real run takes (there is no precompilation phase).
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    HookResult,
    call_statement,
    leading_lines,
    on,
    statements_of,
)
from migrate.rules.optimum_training.state import _qualified_name, _state
from migrate.rules.removal import Removal, removable
from migrate.rules.todo_catalogue import flatten

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM508",
        name="optimum-utils",
        safety="safe",
        summary="Optimum helpers: PEFT wrappers -> peft, `is_main_worker()` -> `PartialState().is_main_process`, SDK patching dropped.",
        rationale="`get_peft_model`/`NeuronPeftModel` wrapped peft for NxD layers, which native "
        "models do not have. `patch_transformers_for_neuron_sdk()` and `MixedPrecisionConfig` "
        "configured the XLA stack and are removed; `is_precompilation()` is always False "
        "(there is no `neuron_parallel_compile` phase).",
        before="from optimum.neuron.utils import is_main_worker, patch_transformers_for_neuron_sdk\n"
        'patch_transformers_for_neuron_sdk()\nif is_main_worker():\n    print("ready")\n',
        after='from accelerate import PartialState\nif PartialState().is_main_process:\n    print("ready")\n',
    ),
)


@removable
def sdk_patching(stmt: cst.BaseStatement, ctx: FileContext) -> Removal | None:
    """`patch_transformers_for_neuron_sdk()` configured transformers for the XLA stack."""
    call = call_statement(stmt)
    if call is not None and _qualified_name(call.func, ctx) == "patch_transformers_for_neuron_sdk":
        return Removal("NM508")
    return None


@on("If")
def precompilation_branch(node: cst.If, ctx: FileContext) -> HookResult:
    """`if is_precompilation(): A else: B` -> `B`; `if not is_precompilation(): A` -> `A`.

    There is no `neuron_parallel_compile` phase any more, so the branch it guarded is dead.
    """
    test = node.test
    negated = type(test) is cst.UnaryOperation and type(test.operator) is cst.Not
    constant = test.expression if negated else test  # type: ignore[attr-defined]
    if id(constant) not in _state(ctx).precompilation or isinstance(node.orelse, cst.If):
        return node
    if negated:
        kept = statements_of(node.body)
    else:
        kept = statements_of(node.orelse.body) if node.orelse is not None else []
    if not kept:
        if any(line.comment is not None for line in node.leading_lines):
            return cst.SimpleStatementLine([cst.Pass()], leading_lines=node.leading_lines)
        return cst.RemoveFromParent()
    kept[0] = kept[0].with_changes(leading_lines=[*node.leading_lines, *leading_lines(kept[0])])
    return flatten(ctx, kept)
