"""What the family records about a file for its later hooks: the device loaders bound, and the
environment a rewrite reads (`os.environ` or a name bound to it), so every rewrite of a file reads it the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.rules.base import (
    code,
    family_state,
)
from migrate.rules.xla.names import _MULTI


@dataclass
class _State:
    # Nodes this family wrote, by id; each entry holds its node so that no other node reuses the id.
    unwrapped: dict[int, tuple[cst.BaseExpression, cst.BaseExpression]] = field(
        default_factory=dict
    )  # loader -> device
    produced: dict[int, cst.BaseExpression] = field(default_factory=dict)  # rank expressions
    loaders: dict[str, cst.BaseExpression] = field(default_factory=dict)  # loader variable -> device


def _state(ctx: FileContext) -> _State:
    return family_state(ctx, "xla", _State)


def _env(ctx: FileContext, name: str, default: int) -> str:
    return f'int({code(ctx.module_ref("os"))}.environ.get("{name}", {default}))'


def _env_expression(ctx: FileContext, name: str, default: int) -> cst.BaseExpression:
    """The torchrun variable as an expression; remembered so the call holding it can be re-wrapped."""
    node = cst.parse_expression(_env(ctx, name, default))
    _state(ctx).produced[id(node)] = node
    return node


def _multi_process(ctx: FileContext) -> bool:
    return ctx.facts.multi_process or bool(_MULTI.search(ctx.text))
