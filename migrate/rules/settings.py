"""Settings sources: the places where a script *chooses* a value by name.

Context rule 2 (rewrite sources, not uses) and rule 7 (rewrite argparse/dataclass defaults)
mean one kind of rewrite applies in many syntactic places. A family registers a `Setting`
(which names it owns and how a value is rewritten); this module applies it to:

- call keywords:            `from_pretrained(..., device_map="auto")`
- argparse defaults:        `parser.add_argument("--device", default="cuda")`
- assignments:              `device = "cuda"`, `backend = 'nccl'`
- annotated/dataclass:      `optim: str = field(default="paged_adamw_32bit")`
- dict literals:            `{"attn_implementation": "flash_attention_2"}`
- dict entries set by key:  `model_kwargs["attn_implementation"] = "flash_attention_2"`

Rewriters return None to leave a value alone; they see through `a if cond else b` and
`a or b`, so the CUDA arm of a conditional is rewritten and the other arms are kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import callee_name, kwarg, last_name, on, option_name, replace_arg

RULES: tuple[Rule, ...] = ()  # no rules of its own: its hooks dispatch the settings other families declare

Rewriter = Callable[[cst.BaseExpression, FileContext], "cst.BaseExpression | None"]


@dataclass(frozen=True)
class Setting:
    rule_id: str
    names: re.Pattern[str]
    rewrite: Rewriter
    kwargs: bool = True  # also apply to call keywords (False where a kwarg needs context)
    assign: bool = True  # also apply to assignments, dataclass fields and argparse defaults


SETTINGS: list[Setting] = []


def setting(rule_id: str, names: str, rewrite: Rewriter, kwargs: bool = True, assign: bool = True) -> None:
    """Register a named setting owned by `rule_id`."""
    SETTINGS.append(Setting(rule_id, re.compile(names), rewrite, kwargs, assign))


def through(rewrite: Callable[[cst.BaseExpression, FileContext], cst.BaseExpression | None]) -> Rewriter:
    """Lift a leaf rewriter so it also applies inside conditionals, `or`, and parentheses."""

    def walk(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
        if type(node) is cst.IfExp:
            body, orelse = walk(node.body, ctx), walk(node.orelse, ctx)
            if body is None and orelse is None:
                return None
            body, orelse = body or node.body, orelse or node.orelse
            if _same(body, orelse):  # `bf16 if a else fp16` -> `bf16 if a else bf16` says `bf16`
                return body
            return node.with_changes(body=body, orelse=orelse)
        if type(node) is cst.BooleanOperation:
            left, right = walk(node.left, ctx), walk(node.right, ctx)
            if left is None and right is None:
                return None
            return node.with_changes(left=left or node.left, right=right or node.right)
        return rewrite(node, ctx)

    return walk


def _same(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    module = cst.Module([])
    return module.code_for_node(a) == module.code_for_node(b)


def _apply(
    name: str | None, value: cst.BaseExpression, ctx: FileContext, keyword: bool
) -> tuple[cst.BaseExpression | None, str | None]:
    """The first setting rewrite of `name = value` (a keyword, an assignment or an argparse/dataclass default)."""
    if name is None:
        return None, None
    for s in SETTINGS:
        if (keyword and not s.kwargs) or (not keyword and not s.assign):
            continue
        if not s.names.fullmatch(name) or not ctx.enabled(s.rule_id):
            continue
        new = s.rewrite(value, ctx)
        if new is not None:
            return new, s.rule_id
    return None, None


@on("Call")
def call_settings(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    """Keywords of any call, and `default=` of `add_argument("--name")`/`field(default=)`."""
    option = option_name(node)
    if option is not None:
        default = kwarg(node, "default")
        if default is not None:
            new, rule = _apply(option, default.value, ctx, keyword=False)
            if new is not None and rule is not None:
                ctx.hit(rule)
                return replace_arg(node, default, default.with_changes(value=new))
        return node
    if callee_name(node) == "add_argument":
        return node
    ctx.callee = callee_name(node)
    for arg in node.args:
        if arg.keyword is None:
            continue
        new, rule = _apply(arg.keyword.value, arg.value, ctx, keyword=True)
        if new is not None and rule is not None:
            ctx.hit(rule)
            node = replace_arg(node, arg, arg.with_changes(value=new))
    ctx.callee = None
    return node


def subscript_key(node: cst.BaseExpression) -> str | None:
    """`kwargs["attn_implementation"]` -> `attn_implementation`; other subscripts -> None."""
    if type(node) is not cst.Subscript or len(node.slice) != 1:
        return None
    index = node.slice[0].slice
    if type(index) is not cst.Index or type(index.value) is not cst.SimpleString:
        return None
    key = index.value.evaluated_value
    return key if isinstance(key, str) else None


@on("Assign")
def assign_settings(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """`device = "cuda"`, `self.backend = "nccl"`; the first target's name decides.

    A dict entry set by key (`model_kwargs["attn_implementation"] = ...`) is a keyword the
    dict will carry into a call, so it is treated like one.
    """
    target = node.targets[0].target
    key = subscript_key(target)
    if key is not None:
        new, rule = _apply(key, node.value, ctx, keyword=True)
    else:
        new, rule = _apply(last_name(target), node.value, ctx, keyword=False)
    if new is not None and rule is not None:
        ctx.hit(rule)
        return node.with_changes(value=new)
    return node


@on("AnnAssign")
def ann_assign_settings(node: cst.AnnAssign, ctx: FileContext) -> cst.AnnAssign:
    """Dataclass fields: `device: str = "cuda"` and `optim: str = field(default=...)`."""
    if node.value is None:
        return node
    name = last_name(node.target)
    value = node.value
    if type(value) is cst.Call and callee_name(value) == "field":
        default = kwarg(value, "default")
        if default is None:
            return node
        new, rule = _apply(name, default.value, ctx, keyword=False)
        if new is not None and rule is not None:
            ctx.hit(rule)
            return node.with_changes(value=replace_arg(value, default, default.with_changes(value=new)))
        return node
    new, rule = _apply(name, value, ctx, keyword=False)
    if new is not None and rule is not None:
        ctx.hit(rule)
        return node.with_changes(value=new)
    return node


@on("DictElement")
def dict_settings(node: cst.DictElement, ctx: FileContext) -> cst.DictElement:
    """`{"device_map": "auto", "attn_implementation": "flash_attention_2"}`."""
    key = node.key
    if type(key) is not cst.SimpleString:
        return node
    name = key.evaluated_value
    new, rule = _apply(name if isinstance(name, str) else None, node.value, ctx, keyword=True)
    if new is not None and rule is not None:
        ctx.hit(rule)
        return node.with_changes(value=new)
    return node
