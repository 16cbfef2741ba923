"""NM532 and the calls of a migrated pipeline: its loads (through `load`), `save_pretrained` and
`push_to_hub`, its calls (which get the export shapes, as Optimum's compiled pipeline used them whatever the call
said), folder names bound to strings and functions that return a migrated pipeline.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    argument,
    code,
    has_star_kwargs,
    kwarg,
    on,
    positional_args,
    string_value,
    wrap_long,
)
from migrate.rules.optimum_diffusion.load import _load
from migrate.rules.optimum_diffusion.state import _Export, _folder, _pipeline_class, _shape_values, _state

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM532",
        name="diffusion-export-shapes",
        safety="safe",
        summary="Calls of a migrated pipeline get the export `height`/`width` (and `num_images_per_prompt`, "
        "PixArt's `max_sequence_length`).",
        rationale="Optimum's `__call__` overwrote the caller's height and width with the compiled ones (and PixArt's "
        "`max_sequence_length` with the compiled sequence length); a native pipeline would use its default "
        "size instead (the model's `sample_size` x the VAE scale). Passing the export values keeps the images "
        "the script made and one denoiser and one decode graph. A value the call gives itself is kept, with a note.",
        before="from optimum.neuron import NeuronStableDiffusionPipeline\n"
        "pipe = NeuronStableDiffusionPipeline.from_pretrained(model_id, export=True, height=512, width=512)\n"
        "image = pipe(prompt).images[0]\n",
        after="from optimum.neuron import NeuronStableDiffusionPipeline\n"
        "pipe = NeuronStableDiffusionPipeline.from_pretrained(model_id, export=True, height=512, width=512)\n"
        "image = pipe(prompt, height=512, width=512).images[0]\n",
    ),
)


@on("Call", "NM531", "NM532", "NM533", "NM534", "NM913", "NM915", "NM917", "NM919", "NM934")
def optimum_diffusion_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    """Loads (NM531-NM534), `save_pretrained`/`push_to_hub` of a migrated pipeline, its calls (NM532)."""
    func = node.func
    if type(func) is cst.Attribute:
        if func.attr.value == "from_pretrained":
            name = _pipeline_class(func.value, ctx)
            if name is not None:
                return _load(node, name, ctx)
            return node
        pipes = _state(ctx).pipes
        export = pipes.get(code(func.value)) if pipes else None
        if export is None:
            return node
        if func.attr.value == "save_pretrained":
            folder = argument(node, 0, "save_directory")
            text = _folder(folder.value, ctx) if folder is not None else None
            if text is not None:
                _state(ctx).saved[text] = export
            else:
                _state(ctx).saved_elsewhere = export
        elif func.attr.value == "push_to_hub" and ctx.enabled("NM531"):
            return _push_to_hub(node, ctx)
        return node
    pipes = _state(ctx).pipes
    export = pipes.get(code(func)) if pipes else None
    if export is None or (export.tp is not None and ctx.enabled("NM534")) or not ctx.enabled("NM532"):
        return node
    return _with_shapes(node, export, ctx)


def _with_shapes(node: cst.Call, export: _Export, ctx: FileContext) -> cst.Call:
    """NM532: `pipe(prompt)` -> `pipe(prompt, height=H, width=W)` with the export's values."""
    if has_star_kwargs(node):
        return node
    added = False
    for name, value in _shape_values(export).items():
        given = kwarg(node, name)
        if given is None:
            node = add_kwarg(node, name, code(value))
            added = True
        elif code(given.value) != code(value):
            ctx.warn("NM532", f"{name}={code(given.value)} kept: Optimum ran this call with the export's {code(value)}")
    if added:
        ctx.hit("NM532")
    return wrap_long(node) if added else node


def _push_to_hub(node: cst.Call, ctx: FileContext) -> cst.Call:
    """Optimum's `push_to_hub(save_directory, repository_id, private, use_auth_token)` -> diffusers' `push_to_hub(repo_id)`."""
    repository = argument(node, 1, "repository_id")
    if repository is None or len(positional_args(node)) > 2:
        return node
    args = [cst.Arg(repository.value)]
    for arg in node.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword == "private":
            args.append(arg)
        elif keyword == "use_auth_token" and not (type(arg.value) is cst.Name and arg.value.value == "True"):
            args.append(arg.with_changes(keyword=cst.Name("token")))
    args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in args[:-1]] + [
        args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    ]
    ctx.hit("NM531")
    return node.with_changes(args=args)


@on("Assign")
def folder_names(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """Remember `save_dir = "sd_neuron/"` (a folder passed by name is recognised when it is loaded again) and
    `pipe = build_pipeline(...)` of a function that returns a migrated pipeline (its calls get the export shapes)."""
    if len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
        state = _state(ctx)
        name = node.targets[0].target.value
        text = string_value(node.value)
        if text is not None:
            state.strings[name] = text
        else:
            state.strings.pop(name, None)
        value = node.value
        if type(value) is cst.Call and type(value.func) is cst.Name and value.func.value in state.factories:
            state.pipes[name] = state.factories[value.func.value]
    return node


class _Returns(cst.CSTVisitor):
    """The names a function body returns, not counting nested functions."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Return(self, node: cst.Return) -> None:
        if type(node.value) is cst.Name:
            self.names.add(node.value.value)


@on("FunctionDef")
def pipeline_factory(node: cst.FunctionDef, ctx: FileContext) -> cst.FunctionDef:
    """`def export(...): pipe = NeuronX.from_pretrained(...); ...; return pipe`: callers hold that pipeline."""
    state = _state(ctx)
    if not state.pipes:
        return node
    returns = _Returns()
    node.body.visit(returns)
    found = [state.pipes[name] for name in returns.names if name in state.pipes]
    if len(found) == 1:
        state.factories[node.name.value] = found[0]
    return node
