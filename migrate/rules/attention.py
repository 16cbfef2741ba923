"""NM207-NM208 attention kernels: flash-attention -> SDPA, xformers calls removed (docs/rules.md NM207-NM208).

Both also remove a repository's own attention monkey patch, called as a statement before training
(FastChat's `train_mem.py`: `replace_llama_attn_with_flash_attn()`; `train_xformers.py`:
`replace_llama_attn_with_xformers_attn()`; philschmid's `utils/llama_patch.py`:
`replace_attn_with_flash_attn()`): the patch module imports `flash_attn`/`xformers` at its top, which
do not exist with TorchNeuron, and only swaps the model's attention forward for a CUDA kernel's. Without
it the model runs transformers' own attention (SDPA by default). The call goes, and its import once
nothing else reads it; `if args.flash_attn:` left empty goes too.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    HookResult,
    code,
    kwarg,
    last_name,
    leading_lines,
    method_of,
    on,
    replace_arg,
    statements_of,
    string_value,
    with_string_value,
)
from migrate.rules.removal import Removal, removable
from migrate.rules.retired import retire
from migrate.rules.settings import setting, through
from migrate.rules.todo_catalogue import flatten

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM207",
        name="flash-attention",
        safety="safe",
        summary='`attn_implementation="flash_attention_2"` (and 3, kernels-community) -> `"sdpa"`.',
        rationale="FlashAttention kernels are CUDA-only. `sdpa` lowers to ATen scaled-dot-product "
        "attention, which TorchNeuron provides; it is also the transformers default. Keywords, "
        "dict keys, argparse/dataclass defaults are rewritten; `use_flash_attention_2=True` "
        '(removed in transformers 5) becomes `attn_implementation="sdpa"`. A repository\'s own FlashAttention '
        "monkey patch called as a statement (`replace_llama_attn_with_flash_attn()`, FastChat) goes with its "
        "import: the patch module imports `flash_attn` and only swaps in its kernel.",
        before='model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="flash_attention_2")\n',
        after='model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="sdpa")\n',
    ),
    Rule(
        id="NM208",
        name="xformers",
        safety="safe",
        summary="xformers goes: `enable_xformers_memory_efficient_attention()` calls, the `if`s that test for it, "
        "its imports.",
        rationale="xformers is a CUDA kernel library, not installed with TorchNeuron; diffusers and transformers "
        "default to SDPA, so dropping the call keeps behaviour. An `if` whose test names xformers "
        "(`args.enable_xformers_memory_efficient_attention`, `is_xformers_available()`) runs only xformers "
        "code: it goes, or its `else` branch (the path taken without xformers) takes its place unless it ends "
        "in a `raise` (the error for a missing xformers, which goes too), and an "
        "`elif` testing it is dropped from its chain. Its `import xformers` (version checks) goes with it, "
        "and so does an import of `xformers`/`is_xformers_available` nothing reads any more, and a repository's "
        "own xformers monkey patch call (`replace_llama_attn_with_xformers_attn()`) with its import.",
        before="from diffusers.utils.import_utils import is_xformers_available\n"
        "if args.enable_xformers_memory_efficient_attention:\n    if is_xformers_available():\n"
        "        import xformers\n        unet.enable_xformers_memory_efficient_attention()\n"
        '    else:\n        raise ValueError("xformers is not available")\nunet.train()\n',
        after="unet.train()\n",
    ),
)


def _flash(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    text = string_value(node)
    if text is not None and (text.startswith("flash_attention") or "flash-attn" in text or "flash_attn" in text):
        return with_string_value(node, "sdpa")  # type: ignore[arg-type]
    return None


setting("NM207", r"attn_implementation|attention_implementation|attn_impl", through(_flash))


@on("Call", "NM207")
def use_flash_attention_2(node: cst.Call, ctx: FileContext) -> cst.Call:
    arg = kwarg(node, "use_flash_attention_2")
    if arg is None or not ctx.enabled("NM207") or kwarg(node, "attn_implementation") is not None:
        return node
    ctx.hit("NM207")
    assert arg.keyword is not None
    return replace_arg(
        node,
        arg,
        arg.with_changes(
            keyword=arg.keyword.with_changes(value="attn_implementation"), value=cst.SimpleString('"sdpa"')
        ),
    )


@on("SimpleStatementLine", "NM208")
def drop_xformers(node: cst.SimpleStatementLine, ctx: FileContext) -> HookResult:
    if not ctx.enabled("NM208"):
        return node
    body = [
        s
        for s in node.body
        if not (
            type(s) is cst.Expr
            and type(s.value) is cst.Call
            and method_of(s.value, "enable_xformers_memory_efficient_attention")
        )
    ]
    if len(body) == len(node.body):
        return node
    ctx.hit("NM208")
    if not body:
        if any(line.comment is not None for line in node.leading_lines):
            return node.with_changes(body=[cst.Pass()])  # keep the comments above the call
        return cst.RemoveFromParent()
    return node.with_changes(body=body)


_XFORMERS = re.compile(r"xformers", re.IGNORECASE)


def _about_xformers(test: cst.BaseExpression, ctx: FileContext) -> bool:
    """The test names xformers. Rendered only in a file that mentions xformers at all: this runs on every `if`."""
    mentions = ctx.family_state.get("mentions-xformers")
    if mentions is None:
        mentions = ctx.family_state["mentions-xformers"] = _XFORMERS.search(ctx.text) is not None
    return mentions and _XFORMERS.search(code(test)) is not None


class _XformersNames(cst.CSTVisitor):
    """The imported names an `if` test reads that are about xformers (`is_xformers_available`)."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx

    def visit_Name(self, node: cst.Name) -> None:
        qualified = self.ctx.qualify(node)
        if qualified is not None and _XFORMERS.search(qualified):
            retire(self.ctx, qualified)


def _retire_xformers(node: cst.If, ctx: FileContext) -> None:
    """The test goes with its branch: `is_xformers_available`'s import, and `xformers`' own, may go too."""
    retire(ctx, "xformers")
    node.test.visit(_XformersNames(ctx))


@on("If", "NM208")
def xformers_branch(node: cst.If, ctx: FileContext) -> HookResult:
    """`if <xformers test>: ... else: B` -> `B`; `elif <xformers test>:` clauses leave the chain.

    An `if` with no `else` is removed by `_xformers_block` when its block is left (comments kept).
    """
    if not ctx.enabled("NM208"):
        return node
    while type(node.orelse) is cst.If and _about_xformers(node.orelse.test, ctx):
        _retire_xformers(node.orelse, ctx)
        ctx.hit("NM208")
        node = node.with_changes(orelse=node.orelse.orelse)
    if not _about_xformers(node.test, ctx) or ctx.elif_clause or node.orelse is None:
        return node
    if type(node.orelse) is cst.Else and _ends_in_raise(node.orelse):
        # `else: raise ValueError("xformers is not available")` is the error for a missing xformers, not a
        # path without it: the whole `if` goes (as `_xformers_block`), or the script would always raise
        return node.with_changes(orelse=None)
    _retire_xformers(node, ctx)
    ctx.hit("NM208")
    if type(node.orelse) is cst.If:  # `if xf: A elif c: B` -> `if c: B`
        return node.orelse.with_changes(leading_lines=node.leading_lines)
    assert type(node.orelse) is cst.Else
    statements = statements_of(node.orelse.body)
    statements[0] = statements[0].with_changes(leading_lines=[*node.leading_lines, *leading_lines(statements[0])])
    return flatten(ctx, statements)


def _ends_in_raise(clause: cst.Else) -> bool:
    """An `else:` whose last statement raises: an error branch."""
    last = statements_of(clause.body)[-1]
    return type(last) is cst.SimpleStatementLine and type(last.body[-1]) is cst.Raise


@removable
def _xformers_block(stmt: cst.BaseStatement, ctx: FileContext) -> Removal | None:
    """An `if` that tests for xformers and has no `else` runs only xformers code: it goes as a whole."""
    if type(stmt) is cst.If and stmt.orelse is None and _about_xformers(stmt.test, ctx):
        _retire_xformers(stmt, ctx)
        return Removal("NM208")
    return None


# A repository's own attention monkey patch: `replace_llama_attn_with_flash_attn`, `replace_attn_with_xformers_attn`.
_MONKEY_PATCH = re.compile(r"replace_\w*attn\w*_with_(flash|xformers)\w*")


@removable
def _attention_monkey_patch(stmt: cst.BaseStatement, ctx: FileContext) -> Removal | None:
    """`replace_llama_attn_with_flash_attn()` as a statement goes (NM207; xformers: NM208), its import with it."""
    if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1 or type(stmt.body[0]) is not cst.Expr:
        return None
    call = stmt.body[0].value
    if type(call) is not cst.Call:
        return None
    found = _MONKEY_PATCH.fullmatch(last_name(call.func) or "")
    if found is None:
        return None
    rule_id = "NM207" if found.group(1) == "flash" else "NM208"
    if not ctx.enabled(rule_id):
        return None
    qualified = ctx.qualify(call.func)
    if qualified is not None:
        retire(ctx, qualified)
    return Removal(rule_id)
