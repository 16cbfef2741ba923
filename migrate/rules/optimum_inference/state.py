"""What a file's Optimum exports fixed, kept for the later hooks: the shapes, dtype and kind of each
exported model (and the keyword dicts a call splats), since the calls that follow a load (generate, an encoder
forward, a read of the export shape) need the values the export fixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.rules.base import (
    family_state,
)


@dataclass
class _Export:
    """What an export call fixed: shapes, tensor-parallel degree, precision."""

    shapes: dict[str, cst.BaseExpression] = field(default_factory=dict)
    fp32: bool = False
    compiled: bool = False  # True when the call compiles from a checkpoint (export=True, export())

    @property
    def tp(self) -> cst.BaseExpression | None:
        value = self.shapes.get("tensor_parallel_size") or self.shapes.get("num_cores")
        if value is None or (type(value) is cst.Integer and value.value == "1"):
            return None
        return value


@dataclass
class _State:
    configs: dict[str, _Export] = field(default_factory=dict)  # get_neuron_config() results by name
    models: dict[str, _Export] = field(default_factory=dict)  # model variable -> its export
    pending: tuple[_Export, str] | None = None  # (export, kind) of the load in the current statement
    encoder: tuple[str, _Export] | None = None  # encoder model variable and its export
    dicts: dict[str, cst.Dict] = field(default_factory=dict)  # `name = {"key": value, ...}` seen so far
    # those splatted into an Optimum call and inlined there -> the rule credited when the dict goes
    inlined: dict[str, str] = field(default_factory=dict)


def _state(ctx: FileContext) -> _State:
    return family_state(ctx, "optimum-inference", _State)
