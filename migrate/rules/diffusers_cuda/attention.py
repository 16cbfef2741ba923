"""NM231: CUDA attention backends (`set_attention_backend("flash")`, the `DIFFUSERS_ATTN_BACKEND`
setting) become `"native"`, diffusers' SDPA path, the one backend that runs on Neuron.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    on,
    replace_arg,
    string_value,
    with_string_value,
)
from migrate.rules.settings import subscript_key

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM231",
        name="attention-backend",
        safety="safe",
        summary='diffusers attention backends (`set_attention_backend("flash")`, `attention_backend(...)`, '
        '`DIFFUSERS_ATTN_BACKEND`) -> `"native"`.',
        rationale="Every diffusers backend but `native` (PyTorch SDPA), `_native_math` and `flex` needs CUDA: "
        "flash, sage and xformers raise for the missing package, the `*_hub` backends fetch a CUDA kernel "
        'from the Hub and find no Neuron build, `_native_cudnn/_efficient/_flash` pin CUDA SDPA kernels. `"native"` '
        "is diffusers' default and what TorchNeuron runs. `flex` (PyTorch FlexAttention) is kept: it runs on "
        'Neuron since Neuron 2.34 ("FlexAttention runs faster with more masks"). Only literal names are '
        "rewritten; a name read from the command line is left to the runtime shim.",
        before='from diffusers import FluxPipeline\npipe.transformer.set_attention_backend("flash_hub")\n',
        after='from diffusers import FluxPipeline\npipe.transformer.set_attention_backend("native")\n',
    ),
)


# PyTorch SDPA (native, its math reference) and PyTorch FlexAttention, which runs on Neuron since 2.34.
_PORTABLE_BACKENDS = ("native", "_native_math", "flex")


def _native_backend(node: cst.Call, backend: cst.Arg | None, ctx: FileContext) -> cst.Call:
    if backend is None or type(backend.value) is not cst.SimpleString:
        return node
    text = string_value(backend.value)
    if text is None or text in _PORTABLE_BACKENDS:
        return node
    ctx.hit("NM231")
    return replace_arg(node, backend, backend.with_changes(value=with_string_value(backend.value, "native")))


@on("Assign", "NM231")
def attention_backend_env(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """NM231: `os.environ["DIFFUSERS_ATTN_BACKEND"] = "flash"` (read when diffusers is imported)."""
    if len(node.targets) != 1 or subscript_key(node.targets[0].target) != "DIFFUSERS_ATTN_BACKEND":
        return node
    if not ctx.enabled("NM231") or type(node.value) is not cst.SimpleString:
        return node
    text = string_value(node.value)
    if text is None or text in _PORTABLE_BACKENDS:
        return node
    ctx.hit("NM231")
    return node.with_changes(value=with_string_value(node.value, "native"))
