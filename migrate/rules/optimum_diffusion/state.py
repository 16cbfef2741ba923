"""What a file's Optimum diffusion loads exported, kept per file for the later hooks: the shapes,
denoiser and tensor-parallel degree of each pipeline variable, of each folder a pipeline was saved to and of each
function returning one, since calls of the pipeline (NM532) and loads of the saved folder need them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.rules.base import (
    family_state,
    string_value,
)
from migrate.rules.legacy_names import resolve


@dataclass
class _Export:
    """What the export fixed: shapes, denoiser kind, tensor-parallel degree."""

    shapes: dict[str, cst.BaseExpression] = field(default_factory=dict)
    denoiser: str = ""
    tp: cst.BaseExpression | None = None
    pixart: bool = False  # PixArt's calls also take the export sequence length
    controlnet: bool = False  # a ControlNet pipeline: its ControlNet runs every step and is compiled too


@dataclass
class _Load:
    """A pipeline load seen in the current statement, waiting for the statement hook to add its lines."""

    export: _Export
    call: str  # the rewritten call's source, to find it in the statement
    model: str  # the model id expression
    dtype: tuple[str, str]  # (keyword, value source) the components load with
    adapter_lines: list[str]  # NM533's loads after the pipeline's, `_PIPE` standing for its name
    tp: bool  # NM534 shards the transformer: the setup lines go before the load


@dataclass
class _State:
    pending: _Load | None = None
    pipes: dict[str, _Export] = field(default_factory=dict)  # pipeline variable -> its export
    saved: dict[str, _Export] = field(default_factory=dict)  # folder a pipeline was saved to -> its export
    saved_elsewhere: _Export | None = None  # a pipeline saved to a folder only known at run time
    factories: dict[str, _Export] = field(default_factory=dict)  # function returning a migrated pipeline -> its export
    strings: dict[str, str] = field(default_factory=dict)  # `name = "literal"` bindings, for folder names


def _state(ctx: FileContext) -> _State:
    return family_state(ctx, "optimum-diffusion", _State)


def _pipeline_class(node: cst.BaseExpression, ctx: FileContext) -> str | None:
    """The Optimum diffusion class `node` names (resolved by import path), or None."""
    qualified = ctx.qualify(node)
    found = resolve(qualified)
    if found is None or found.rule_id != "NM531":
        return None
    return qualified.rpartition(".")[2]  # type: ignore[union-attr]


def _folder(node: cst.BaseExpression, ctx: FileContext) -> str | None:
    """The folder a path expression names: a string literal or a name bound to one."""
    text = string_value(node)
    if text is None and type(node) is cst.Name:
        text = _state(ctx).strings.get(node.value)
    return text


def _shape_values(export: _Export) -> dict[str, cst.BaseExpression]:
    """The call arguments that carry the export's shapes."""
    values: dict[str, cst.BaseExpression] = {n: export.shapes[n] for n in ("height", "width") if n in export.shapes}
    images = export.shapes.get("num_images_per_prompt")
    if images is not None and not (type(images) is cst.Integer and images.value == "1"):
        values["num_images_per_prompt"] = images
    if export.pixart and "sequence_length" in export.shapes:
        values["max_sequence_length"] = export.shapes["sequence_length"]
    return values
