"""Which names hold training arguments: bound to a `TrainingArguments`/TRL config call, annotated
with one, or unpacked from `HfArgumentParser(...).parse_*()`/`TrlParser`, and forgotten where a name is rebound or
shadowed, so that only reads on such names are rewritten (a field read on anything else is left alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.names import dotted
from migrate.rules.base import family_state, on

_NOT_TRAINER_CONFIGS = ("ModelConfig", "LoraConfig", "BitsAndBytesConfig", "GenerationConfig", "AutoConfig")


_PARSE_METHODS = frozenset(
    {"parse_args_into_dataclasses", "parse_json_file", "parse_yaml_file", "parse_dict", "parse_args_and_config"}
)


@dataclass
class _Bindings:
    """Names known to hold training arguments, in source order; any other rebinding forgets a name."""

    parsers: dict[str, list[str | None]] = field(default_factory=dict)  # parser -> its dataclasses' classes
    arguments: dict[str, str] = field(default_factory=dict)  # name -> its training-arguments class
    # parameters annotated with a class named like a trainer config this file cannot resolve (alignment-handbook's
    # `training_args: SFTConfig`, its own subclass of trl's): read only to find where a moved ModelConfig field went
    config_params: set[str] = field(default_factory=set)


def _bindings(ctx: FileContext) -> _Bindings:
    return family_state(ctx, "drift", _Bindings)


def _arguments_class(node: cst.BaseExpression, ctx: FileContext) -> str | None:
    """The class name when `node` names transformers' TrainingArguments, a TRL config or Optimum's copies."""
    qualified = ctx.qualify(node) or ""
    root, name = qualified.split(".")[0], qualified.rpartition(".")[2]
    if root == "transformers" and name.endswith("TrainingArguments"):
        return name
    if root == "trl" and name.endswith("Config") and name != "DatasetMixtureConfig":
        return name
    if root == "optimum" and name.endswith(("TrainingArguments", "SFTConfig", "ORPOConfig")):
        return name
    return None


def _parser_classes(call: cst.Call, ctx: FileContext) -> list[str | None] | None:
    """For `HfArgumentParser((A, B, TrainingArguments))` (or TrlParser, Optimum's): each dataclass's class."""
    qualified = ctx.qualify(call.func) or ""
    if qualified.split(".")[0] not in ("transformers", "trl", "optimum") or not qualified.endswith(
        ("HfArgumentParser", "TrlParser")
    ):
        return None
    first = call.args[0].value if call.args and call.args[0].keyword is None and not call.args[0].star else None
    if type(first) in (cst.Tuple, cst.List):
        return [None if type(e) is cst.StarredElement else _arguments_class(e.value, ctx) for e in first.elements]  # type: ignore[union-attr]
    return [_arguments_class(first, ctx)] if first is not None else None


def _parsed_classes(value: cst.BaseExpression, ctx: FileContext) -> list[str | None] | None:
    """The dataclasses, in order, that `<parser>.parse_*(...)` returns."""
    if (
        type(value) is not cst.Call
        or type(value.func) is not cst.Attribute
        or value.func.attr.value not in _PARSE_METHODS
    ):
        return None
    parser = value.func.value
    if type(parser) is cst.Name:
        return _bindings(ctx).parsers.get(parser.value)
    return _parser_classes(parser, ctx) if type(parser) is cst.Call else None


def _bound_names(target: cst.BaseExpression) -> list[str]:
    """The plain names an assignment target (`a`, `a, (b, *c)`) binds; attributes and subscripts bind none."""
    if type(target) is cst.Name:
        return [target.value]
    if type(target) in (cst.Tuple, cst.List):
        return [name for e in target.elements for name in _bound_names(e.value)]  # type: ignore[attr-defined]
    if type(target) is cst.StarredElement:
        return _bound_names(target.value)
    return []


@on("Assign")
def arguments_binding(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """Track `args = TrainingArguments(...)`, `parser = HfArgumentParser(...)` and the unpacking of its parse."""
    for target in node.targets:
        _forget(ctx, target.target)
    if len(node.targets) == 1:
        _bind(ctx, node.targets[0].target, node.value)
    return node


@on("AnnAssign")
def annotated_binding(node: cst.AnnAssign, ctx: FileContext) -> cst.AnnAssign:
    """`args: TrainingArguments = TrainingArguments(...)`, and any other annotated rebinding."""
    _forget(ctx, node.target)
    if node.value is not None:
        _bind(ctx, node.target, node.value)
    return node


@on("Param")
def arguments_shadowed(node: cst.Param, ctx: FileContext) -> cst.Param:
    """A parameter of the same name shadows a tracked binding: forget it rather than guess; one annotated with
    a training-arguments class holds one (`def get_model(model_args: ModelConfig, ...)`, open-r1's model utils).

    A parameter is left before the function's body is visited, so its reads there see the binding.
    """
    _forget(ctx, node.name)
    if node.annotation is not None:
        cls = _arguments_class(node.annotation.annotation, ctx)
        if cls is not None:
            _bindings(ctx).arguments[node.name.value] = cls
        elif (dotted(node.annotation.annotation) or "").rpartition(".")[2].endswith("Config"):
            if (dotted(node.annotation.annotation) or "").rpartition(".")[2] not in _NOT_TRAINER_CONFIGS:
                _bindings(ctx).config_params.add(node.name.value)
    return node


@on("FunctionDef")
def parameters_out_of_scope(node: cst.FunctionDef, ctx: FileContext) -> cst.FunctionDef:
    """A function's parameters mean nothing after it: `get_model(model_args, training_args)` must not make a
    later function's `model_args.trust_remote_code` read a `training_args` it does not have."""
    params = node.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        _forget(ctx, param.name)
    return node


def _trainer_config(ctx: FileContext) -> str | None:
    """The one name bound to a TRL trainer config (`training_args` of `TrlParser((ModelConfig, SFTConfig))`)."""
    state = _bindings(ctx)
    names = {n for n, cls in state.arguments.items() if cls.endswith("Config") and cls not in _NOT_TRAINER_CONFIGS}
    names |= state.config_params
    return names.pop() if len(names) == 1 else None


def _forget(ctx: FileContext, target: cst.BaseExpression) -> None:
    state = _bindings(ctx)
    for name in _bound_names(target):
        state.arguments.pop(name, None)
        state.parsers.pop(name, None)
        state.config_params.discard(name)


def _bind(ctx: FileContext, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
    state = _bindings(ctx)
    if type(target) is cst.Name and type(value) is cst.Call:
        parser = _parser_classes(value, ctx)
        cls = _arguments_class(value.func, ctx)
        if parser is not None:
            state.parsers[target.value] = parser
        elif cls is not None:
            state.arguments[target.value] = cls
    index = _index(value)
    classes = _parsed_classes(value.value if index is not None else value, ctx)  # type: ignore[attr-defined]
    if classes is None:
        return
    if index is not None and type(target) is cst.Name and index < len(classes) and classes[index]:
        state.arguments[target.value] = classes[index]  # type: ignore[assignment]
    elif index is None and type(target) in (cst.Tuple, cst.List):
        for element, cls in zip(target.elements, classes):  # type: ignore[attr-defined]
            if type(element.value) is not cst.Name:
                break  # a starred target: the positions after it are unknown
            if cls is not None:
                state.arguments[element.value.value] = cls


def _index(value: cst.BaseExpression) -> int | None:
    """`i` for `<expr>[i]` with a literal non-negative integer index."""
    if type(value) is cst.Subscript and len(value.slice) == 1:
        element = value.slice[0].slice
        if type(element) is cst.Index and type(element.value) is cst.Integer:
            return int(element.value.value)
    return None
