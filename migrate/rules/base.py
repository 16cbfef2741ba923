"""How a rule family plugs into the single traversal, plus small libcst helpers they share.

A family module declares its `Rule` records in a module-level `RULES` tuple and decorates plain
functions with `@on("Call")` (or another node type name). `migrate.rule_families` collects the
hooks of each family, in the order the families are listed there and, within a family, in the
order they are defined. The transformer calls, for every node of that type, each hook in that
order on the *updated* node, and rules return either the same node or a replacement. Hooks
never traverse on their own: that keeps the whole run to one pass over the tree.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

import libcst as cst

from migrate.context import FileContext

N = TypeVar("N", bound=cst.CSTNode)
T = TypeVar("T")
# What a hook returns: the node (changed or not), or libcst's sentinels that remove it or put
# several statements in its place (the engine stops a node's hooks once its type changes).
HookResult = cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[Any]
Hook = Callable[[cst.CSTNode, FileContext], HookResult]

HOOK_ATTRIBUTE = "neuron_migrate_node_type"  # set by `on` on a hook: the libcst class name it handles
RULES_ATTRIBUTE = "neuron_migrate_rules"  # set by `on` on a hook: the ids of the rules it applies


def on(
    node_type: str, *rule_ids: str
) -> Callable[[Callable[[N, FileContext], HookResult]], Callable[[N, FileContext], HookResult]]:
    """Mark a function as the family's hook for leaving nodes of `node_type` (a libcst class name), applying the
    rules `rule_ids`.

    The ids are named where the hook is defined, as ruff tags each rule function with its code, so a reader (and
    `neuron-migrate --explain`, `migrate.rule_sources.hooks`) finds the code of a rule from its id; a hook with no
    ids keeps the other hooks' bookkeeping (names bound, emptied blocks). `tests/migrate/test_docs.py`
    holds each tag to the ids its hook's code names. Marking registers nothing: `migrate.rule_families` collects
    the marked functions of the families it lists, so the hook order is that table's order, not import order.
    """

    def deco(fn: Callable[[N, FileContext], HookResult]) -> Callable[[N, FileContext], HookResult]:
        setattr(fn, HOOK_ATTRIBUTE, node_type)
        setattr(fn, RULES_ATTRIBUTE, rule_ids)
        return fn

    return deco


def hooks_of(module: ModuleType) -> list[tuple[str, Hook]]:
    """The `(node type, hook)` pairs a family module defines, in definition order.

    A family split into a folder (`migrate/rules/<family>/`, one module per sub-topic) lists its modules in its
    `__init__`'s `PARTS`, in the order their hooks run: their hooks in that order, each module's in definition
    order, so splitting a family changes no hook's place.
    """
    parts: tuple[ModuleType, ...] = getattr(module, "PARTS", (module,))
    return [
        (getattr(value, HOOK_ATTRIBUTE), value)
        for part in parts
        for value in vars(part).values()
        if callable(value) and hasattr(value, HOOK_ATTRIBUTE) and getattr(value, "__module__", None) == part.__name__
    ]


# ---- per-file state and source text --------------------------------------------------------


def family_state(ctx: FileContext, key: str, factory: Callable[[], T]) -> T:
    """The per-file state object of one family, created on first use."""
    if key not in ctx.family_state:
        ctx.family_state[key] = factory()
    state = ctx.family_state[key]
    assert isinstance(state, factory)  # type: ignore[arg-type]
    return state


def code(node: cst.CSTNode) -> str:
    """The source text of a node."""
    return cst.Module([]).code_for_node(node)


# ---- keyword arguments -------------------------------------------------------------------


def kwarg(call: cst.Call, name: str) -> cst.Arg | None:
    """The keyword argument `name=` of a call, if present."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional_args(call: cst.Call) -> list[cst.Arg]:
    """The call's positional arguments in order, leaving out `*args` and `**kwargs` splats.

    A splat fills parameters nobody can name from the source, so "the first positional argument"
    is never one: `x.cuda(*devices)` has no device argument a rule could rewrite.
    """
    return [arg for arg in call.args if arg.keyword is None and not arg.star]


def argument(call: cst.Call, position: int, name: str) -> cst.Arg | None:
    """The argument of parameter `name`: passed as `name=`, else the `position`-th positional one (from 0)."""
    found = kwarg(call, name)
    if found is not None:
        return found
    positional = positional_args(call)
    return positional[position] if len(positional) > position else None


def has_star_kwargs(call: cst.Call) -> bool:
    """True when the call forwards `**kwargs`, so an absent keyword may still be passed."""
    return any(arg.star == "**" for arg in call.args)


def may_add(call: cst.Call, name: str) -> bool:
    """Whether a rule may add `name=`: the call neither passes it nor forwards `**kwargs`, which may carry it
    (a duplicate is a TypeError) or something it conflicts with (`DataLoader(**kw)` with a `batch_sampler`)."""
    return kwarg(call, name) is None and not has_star_kwargs(call)


def replace_arg(call: cst.Call, old: cst.Arg, new: cst.Arg) -> cst.Call:
    """Swap one argument, keeping the others (and their formatting) as they are."""
    return call.with_changes(args=[new if a is old else a for a in call.args])


def remove_arg(call: cst.Call, old: cst.Arg) -> cst.Call:
    """Drop one argument; the comma of the new last argument follows the removed one's.

    So does what stood between the removed last argument and the closing paren (the newline of a
    call whose paren sits on its own line), unless the new last argument has its own.
    """
    args = [a for a in call.args if a is not old]
    if args and call.args and call.args[-1] is old:
        closing = args[-1].whitespace_after_arg
        if code(closing) == "":
            closing = old.whitespace_after_arg
        args[-1] = args[-1].with_changes(comma=old.comma, whitespace_after_arg=closing)
    return call.with_changes(args=args)


def add_kwarg(call: cst.Call, name: str, value: str) -> cst.Call:
    """Append `name=value` (value is source text), following the call's existing layout.

    Multi-line calls whose last argument ends in a comma get the new argument on its own
    line with the same indentation and a trailing comma; one argument per line without a
    trailing comma, its own line without one; arguments on one line get `, name=value`, before
    a closing paren that sits on its own line.
    """
    new = cst.Arg(
        keyword=cst.Name(name),
        value=cst.parse_expression(value),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    comma = last.comma
    if type(comma) is cst.Comma and type(comma.whitespace_after) is cst.ParenthesizedWhitespace:
        # One argument per line with a trailing comma: the new argument goes on its own line
        # with the indentation the other arguments use; the last comma (newline + the
        # closing paren's indentation) moves to the new argument.
        if len(args) >= 2 and type(args[-2].comma) is cst.Comma:
            separator = args[-2].comma.whitespace_after
        else:
            separator = call.whitespace_before_args
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=separator))
        args.append(new.with_changes(comma=comma))
        return call.with_changes(args=args)
    # No trailing comma: whatever stood before the closing paren (a newline and its indentation, in a
    # call whose paren sits on its own line) now follows the new argument, not the comma before it.
    closing = last.whitespace_after_arg
    new = new.with_changes(whitespace_after_arg=closing)
    last = last.with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
    if (
        type(comma) is not cst.Comma
        and len(args) >= 2
        and type(args[-2].comma) is cst.Comma
        and type(args[-2].comma.whitespace_after) is cst.ParenthesizedWhitespace
    ):
        # One argument per line without a trailing comma: the new argument gets its own line too.
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=args[-2].comma.whitespace_after))
        args.append(new)
        return call.with_changes(args=args)
    args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    if type(comma) is cst.Comma:  # a trailing comma on one line stays trailing
        new = new.with_changes(comma=comma)
    args.append(new)
    return call.with_changes(args=args)


def rename_kwarg(call: cst.Call, arg: cst.Arg, new_name: str) -> cst.Call:
    """`old=value` -> `new_name=value`, keeping value and formatting."""
    assert arg.keyword is not None
    return replace_arg(call, arg, arg.with_changes(keyword=arg.keyword.with_changes(value=new_name)))


_LONG = 80  # a one-line call longer than this is split one argument per line after a rewrite


def _line_break(extra: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(newline=cst.Newline()), indent=True, last_line=cst.SimpleWhitespace(extra)
    )


def wrap_long(call: cst.Call) -> cst.Call:
    """Put a rewritten one-line call that grew long on one argument per line, as black would."""
    if not call.args or len(code(call)) <= _LONG or "\n" in code(call):
        return call
    args = [a.with_changes(comma=cst.Comma(whitespace_after=_line_break("    "))) for a in call.args]
    args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=_line_break("")))
    return call.with_changes(args=args, whitespace_before_args=_line_break("    "))


# ---- callee shapes -----------------------------------------------------------------------


def callee_name(call: cst.Call) -> str | None:
    """The last component of the called name: `AutoModel.from_pretrained` -> `from_pretrained`."""
    return last_name(call.func)


def method_of(call: cst.Call, name: str) -> bool:
    """True for `<anything>.name(...)`."""
    return type(call.func) is cst.Attribute and call.func.attr.value == name


# ---- string literals ---------------------------------------------------------------------


def string_value(node: cst.BaseExpression) -> str | None:
    """The text of a plain (non f-, non concatenated) string literal, else None."""
    if type(node) is cst.SimpleString:
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def with_string_value(node: cst.SimpleString, value: str) -> cst.SimpleString:
    """Same literal with new text, keeping prefix and quote style."""
    prefix = node.prefix
    quote = node.quote
    return node.with_changes(value=f"{prefix}{quote}{value}{quote}")


def last_name(node: cst.BaseExpression) -> str | None:
    """`args.device` -> `device`; `device` -> `device`; anything else -> None."""
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute:
        return node.attr.value
    return None


def matches(pattern: re.Pattern[str], node: cst.BaseExpression | None) -> bool:
    """True when the node's last name matches the pattern."""
    name = last_name(node) if node is not None else None
    return name is not None and pattern.fullmatch(name) is not None


def option_name(call: cst.Call) -> str | None:
    """For `parser.add_argument("--foo-bar", ...)`, `foo_bar`; else None."""
    if not method_of(call, "add_argument"):
        return None
    for arg in positional_args(call):
        text = string_value(arg.value)
        if text and text.startswith("--"):
            return text[2:].replace("-", "_")
    return None


# ---- statements --------------------------------------------------------------------------


def leading_lines(stmt: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    """The blank and comment lines above a statement.

    Every libcst statement (a simple statement line, a compound statement) has them; the
    `BaseStatement` class does not declare the field, so reading it needs the narrowing here.
    """
    assert isinstance(stmt, cst.SimpleStatementLine | cst.BaseCompoundStatement)
    return stmt.leading_lines


def statements_of(suite: cst.BaseSuite) -> list[cst.BaseStatement]:
    """The statements of a block; a one-line suite (`if x: a; b`) becomes one statement line.

    Hooks that unwrap a block (a dead branch, a `with`) place its statements in the enclosing
    body, where the small statements of a one-line suite cannot stand on their own.
    """
    if isinstance(suite, cst.IndentedBlock):
        return list(suite.body)
    assert isinstance(suite, cst.SimpleStatementSuite)
    return [cst.SimpleStatementLine(body=suite.body, trailing_whitespace=suite.trailing_whitespace)]


def call_statement(stmt: cst.BaseStatement) -> cst.Call | None:
    """The call of a statement that is exactly one call expression (`xm.mark_step()`)."""
    if type(stmt) is cst.SimpleStatementLine and len(stmt.body) == 1:
        small = stmt.body[0]
        if type(small) is cst.Expr and type(small.value) is cst.Call:
            return small.value
    return None


def assignment(stmt: cst.BaseStatement) -> tuple[str, cst.BaseExpression] | None:
    """`(name, value)` for a statement that is exactly `name = value`."""
    if type(stmt) is cst.SimpleStatementLine and len(stmt.body) == 1 and type(stmt.body[0]) is cst.Assign:
        assign = stmt.body[0]
        if len(assign.targets) == 1 and type(assign.targets[0].target) is cst.Name:
            return assign.targets[0].target.value, assign.value
    return None


def environ_setting(stmt: cst.BaseStatement) -> str | None:
    """The variable a statement sets in `os.environ` (`os.environ["X"] = ...`, `os.environ.setdefault("X", ...)`),
    if a literal; the compile-variable and torch_xla-setting rules both act on such lines."""
    if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    key: cst.BaseExpression | None = None
    if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Subscript:
        target = small.targets[0].target
        if last_name(target.value) == "environ" and len(target.slice) == 1 and type(target.slice[0].slice) is cst.Index:
            key = target.slice[0].slice.value
    elif type(small) is cst.Expr and type(small.value) is cst.Call and method_of(small.value, "setdefault"):
        func = small.value.func
        if type(func) is cst.Attribute and last_name(func.value) == "environ" and small.value.args:
            key = small.value.args[0].value
    return string_value(key) if key is not None else None


def bnb_bits(call: cst.Call) -> str:
    """`"8bit"` for a bitsandbytes load or config that asks for 8 bits (`load_in_8bit=` set, not False/None, and no
    4-bit request beside it), else `"4bit"`: which memory factor NM908's TODO names."""

    def asked(name: str) -> bool:
        arg = kwarg(call, name)
        return arg is not None and not (type(arg.value) is cst.Name and arg.value.value in ("False", "None"))

    return "8bit" if asked("load_in_8bit") and not asked("load_in_4bit") else "4bit"
