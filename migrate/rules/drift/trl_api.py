"""NM924: TRL helpers removed in 1.x (`setup_chat_format`): the import fails under TRL 1.x whether or
not the helper is called, so it goes, and each call keeps a TODO saying what replaces it.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.rules.base import on
from migrate.rules.retired import withdraw
from migrate.rules.todo_catalogue import REMOVED_TRL_API


@on("ImportFrom", "NM924")
def removed_trl_import(node: cst.ImportFrom, ctx: FileContext) -> cst.ImportFrom:
    """`from trl import setup_chat_format` fails at import under TRL 1.x, read or not: the import goes.

    A script that imports it for a branch it may never take (alignment-handbook's `sft.py` calls it only
    when the tokenizer has no chat template; philschmid's `run_fsdp_qlora.py` never calls it) then runs;
    each call keeps TODO NM924 saying what replaces it (`removed_trl_call`).
    """
    if not (type(node.module) is cst.Name and node.module.value == "trl") or isinstance(node.names, cst.ImportStar):
        return node
    for alias in node.names:
        if type(alias.name) is cst.Name and alias.name.value in REMOVED_TRL_API and ctx.enabled("NM924"):
            ctx.hit("NM924")
            withdraw(ctx, f"trl.{alias.name.value}")
    return node


@on("Call", "NM924")
def removed_trl_call(node: cst.Call, ctx: FileContext) -> cst.Call:
    """A call of a TRL helper removed in 1.x (its import is withdrawn): TODO NM924 on its statement."""
    qualified = ctx.qualify(node.func) or ""
    head, _, name = qualified.rpartition(".")
    message = REMOVED_TRL_API.get(name) if head == "trl" else None
    if message is not None and ctx.enabled("NM924"):
        ctx.todo("NM924", message)
    return node
