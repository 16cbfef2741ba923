"""NM207-NM208 attention kernels: flash-attention -> SDPA, xformers calls removed (docs/rules.md NM207-NM208)."""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import HookResult, kwarg, method_of, on, replace_arg, string_value, with_string_value
from migrate.rules.settings import setting, through

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM207",
        name="flash-attention",
        safety="safe",
        summary='`attn_implementation="flash_attention_2"` (and 3, kernels-community) -> `"sdpa"`.',
        rationale="FlashAttention kernels are CUDA-only. `sdpa` lowers to ATen scaled-dot-product "
        "attention, which TorchNeuron provides; it is also the transformers default. Keywords, "
        "dict keys, argparse/dataclass defaults are rewritten; `use_flash_attention_2=True` "
        '(removed in transformers 5) becomes `attn_implementation="sdpa"`.',
        before='model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="flash_attention_2")\n',
        after='model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="sdpa")\n',
    ),
    Rule(
        id="NM208",
        name="xformers",
        safety="safe",
        summary="`*.enable_xformers_memory_efficient_attention()` calls are removed.",
        rationale="xformers is a CUDA kernel library; diffusers and transformers default to SDPA, "
        "so dropping the call keeps behaviour. An `if` body left empty becomes `pass`.",
        before="if args.enable_xformers_memory_efficient_attention:\n    unet.enable_xformers_memory_efficient_attention()\n",
        after="if args.enable_xformers_memory_efficient_attention:\n    pass\n",
    ),
)


def _flash(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    text = string_value(node)
    if text is not None and (text.startswith("flash_attention") or "flash-attn" in text or "flash_attn" in text):
        return with_string_value(node, "sdpa")  # type: ignore[arg-type]
    return None


setting("NM207", r"attn_implementation|attention_implementation|attn_impl", through(_flash))


@on("Call")
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


@on("SimpleStatementLine")
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
