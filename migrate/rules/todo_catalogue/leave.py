"""How a TODO is worded and placed: each rule's own text (`MESSAGES`, from the catalogue's rules) or
one worded for the case, left on the current statement (`todo`) or put above a statement that replaced it
(`attach`, `flatten`), once per statement and rule so a rerun adds none.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import TypeVar

import libcst as cst

from migrate.context import FileContext
from migrate.markers import TODO_PREFIX
from migrate.rules.base import leading_lines
from migrate.rules.todo_catalogue import cuda, libraries, optimum_xla

S = TypeVar("S", bound=cst.BaseStatement)

MESSAGES: dict[str, str] = {rule.id: rule.message for part in (cuda, optimum_xla, libraries) for rule in part.RULES}
# TRL helpers removed in 1.x -> the NM924 TODO that says what replaces each.
REMOVED_TRL_API: dict[str, str] = {"setup_chat_format": MESSAGES["NM924"]}


def quantized_load_message(method: str) -> str:
    """NM908's text for a load that quantized with `method`: `"4bit"` (the catalogued text), `"8bit"`, or a config
    class (`GPTQConfig`): the memory the bf16 load now takes depends on what the quantized one saved."""
    if method == "4bit":
        return MESSAGES["NM908"]
    if method == "8bit":
        return MESSAGES["NM908"].replace("(~4x the 4-bit memory)", "(~2x the 8-bit memory)")
    return (
        f"{method} quantization runs CUDA kernels; load the unquantized model in bf16 instead (2-4x the quantized "
        "memory), consider FSDP or more NeuronCores"
    )


def todo(ctx: FileContext, rule_id: str, message: str | None = None) -> None:
    """Leave the TODO `rule_id` on the current statement (its own text unless `message` is given)."""
    if ctx.enabled(rule_id):
        ctx.todo(rule_id, message or MESSAGES[rule_id])


def attach(stmt: S, ctx: FileContext, rule_id: str, header: Set[str] = frozenset(), message: str | None = None) -> S:
    """Put the TODO `rule_id` above `stmt` directly, once (also not when `header` has it).

    For statements that replace the one a hook ran for (an unwrapped `with`, a rewritten
    import), whose statement frame no longer owns them.
    """

    tag = f"{TODO_PREFIX}{rule_id}"
    present = {line.comment.value.split(")")[0] for line in leading_lines(stmt) if line.comment is not None}
    if tag in present | set(header) or not ctx.enabled(rule_id):
        return stmt
    comment = cst.EmptyLine(comment=cst.Comment(f"{tag}): {message or MESSAGES[rule_id]}"))
    return stmt.with_changes(leading_lines=[*leading_lines(stmt), comment])


def flatten(ctx: FileContext, statements: Sequence[cst.BaseStatement]) -> cst.FlattenSentinel[cst.BaseStatement]:
    """Several statements in place of the current one, its TODOs on the first of them.

    The engine hands the TODOs of a statement that became several to the enclosing statement
    (a `def` line, say); they belong above the code they are about.
    """
    frame = ctx.frames[-1]
    first = statements[0]
    for rule_id, message in frame.todos:
        first = attach(first, ctx, rule_id, message=message)
    frame.todos = []
    return cst.FlattenSentinel([first, *statements[1:]])
