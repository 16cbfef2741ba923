"""NM507: `with lazy_load_for_parallelism(...):` is unwrapped, and the loads under it take the
`DistributedConfig` the context manager stood for, since native loads shard at `from_pretrained`.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    HookResult,
    add_kwarg,
    kwarg,
    leading_lines,
    method_of,
    on,
    statements_of,
    wrap_long,
)
from migrate.rules.optimum_training.parallel import _cli_arguments, _distributed_config
from migrate.rules.optimum_training.state import _is_one, _qualified_name
from migrate.rules.todo_catalogue import flatten

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM507",
        name="lazy-load",
        safety="safe",
        summary="`with lazy_load_for_parallelism(...):` blocks are unwrapped.",
        rationale="Up to 0.2 the context manager created Linear/Embedding layers on the meta device "
        "so NxD could shard them later. Native sharded loading is `from_pretrained(..., "
        "distributed_config=...)`; the body runs as it is. A tensor-parallel degree taken from the "
        "command line gets TODO NM914.",
        before="from optimum.neuron.distributed import lazy_load_for_parallelism\n"
        "with lazy_load_for_parallelism(tensor_parallel_size=1):\n    model = AutoModelForCausalLM.from_pretrained(name)\n",
        after="model = AutoModelForCausalLM.from_pretrained(name)\n",
    ),
)


@on("With", "NM505", "NM507")
def lazy_load(node: cst.With, ctx: FileContext) -> HookResult:
    """Unwrap `with lazy_load_for_parallelism(...):`; other context managers in the same `with` stay."""
    items = [
        i
        for i in node.items
        if not (type(i.item) is cst.Call and _qualified_name(i.item.func, ctx) == "lazy_load_for_parallelism")
    ]
    if len(items) == len(node.items):
        return node
    removed = next(i for i in node.items if i not in items)
    assert type(removed.item) is cst.Call
    tp = kwarg(removed.item, "tensor_parallel_size")
    parallel = tp is not None and not _is_one(tp.value)
    # A degree read from CLI-parsed training arguments is gone (TODO NM914, from the attribute
    # hook); one the script holds itself (argparse, a constant) moves to the loads in the body.
    from_cli = parallel and type(tp.value) is cst.Attribute and _cli_arguments(ctx)  # type: ignore[union-attr]
    if not ctx.enabled("NM507"):
        return node
    ctx.hit("NM507")
    if items:
        items[-1] = items[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return node.with_changes(items=items)
    body = statements_of(node.body)
    body[0] = body[0].with_changes(leading_lines=[*node.leading_lines, *leading_lines(body[0])])
    if parallel and not from_cli and ctx.enabled("NM505"):
        assert tp is not None
        loader = _LoadSharded(ctx)
        body = [stmt.visit(loader) for stmt in body]  # type: ignore[misc]
        if loader.sharded:
            config = _distributed_config(
                ctx, tp.value, cst.Name(ctx.name_ref("transformers.distributed", "DistributedConfig"))
            )
            line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(_CONFIG))], wrap_long(config))])
            body = [
                line.with_changes(leading_lines=leading_lines(body[0])),
                body[0].with_changes(leading_lines=[]),
                *body[1:],
            ]
    return flatten(ctx, body)  # the with statement's TODOs (NM914) go on its first statement


_CONFIG = "distributed_config"


class _LoadSharded(cst.CSTTransformer):
    """Pass `distributed_config=distributed_config` to the loads of an unwrapped lazy-load block."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.sharded = False

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if not method_of(updated, "from_pretrained") or kwarg(updated, "distributed_config") is not None:
            return updated
        self.ctx.hit("NM505")
        self.sharded = True
        return wrap_long(add_kwarg(updated, "distributed_config", _CONFIG))
