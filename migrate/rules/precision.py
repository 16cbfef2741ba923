"""NM2xx precision: fp16 -> bf16, `torch_dtype` -> `dtype`, autocast, GradScaler, tf32.

Rationale per rule: docs/rules.md (NM2xx); the gap: docs/gaps.md#precision. Trainium computes in bf16 on every generation; fp16 would need a loss
scaler whose Neuron support is unconfirmed, and `tf32=True` raises on any non-CUDA host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    argument,
    callee_name,
    family_state,
    kwarg,
    matches,
    may_add,
    method_of,
    on,
    positional_args,
    remove_arg,
    rename_kwarg,
    replace_arg,
    string_value,
    with_string_value,
)
from migrate.rules.diffusers_common import is_diffusers_load, keeps_torch_dtype
from migrate.rules.settings import setting, subscript_key, through

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM201",
        name="fp16-to-bf16",
        safety="unsafe",
        safety_reason="bf16 keeps fewer mantissa bits than fp16: numerics and loss curves change",
        summary='Mixed-precision flags: `fp16=True` -> `bf16=True`, `mixed_precision="fp16"` -> `"bf16"`.',
        rationale="bf16 works on all Trainium generations and needs no loss scaling. In "
        "TrainingArguments/TRL configs `fp16=True` becomes `bf16=True` (an existing `bf16=False` "
        "is dropped); `fp16=not is_bf16_supported()` becomes `bf16=True`. Accelerate's "
        "`mixed_precision` and argparse `--mixed_precision` defaults follow.",
        before='args = TrainingArguments(output_dir="out", fp16=True)\naccelerator = Accelerator(mixed_precision="fp16")\n',
        after='args = TrainingArguments(output_dir="out", bf16=True)\naccelerator = Accelerator(mixed_precision="bf16")\n',
    ),
    Rule(
        id="NM202",
        name="fp16-dtype",
        safety="unsafe",
        safety_reason="bf16 keeps fewer mantissa bits than fp16: numerics change",
        summary="Load/cast dtypes `torch.float16` -> `torch.bfloat16`; `.half()` -> `.to(torch.bfloat16)`.",
        rationale="Only keyword arguments that choose a load or cast dtype (`dtype=`, `torch_dtype=`, "
        "`bnb_4bit_compute_dtype=`, `param_dtype=`, dict keys of model kwargs) and `.half()` are "
        "rewritten; comparisons such as `x.dtype == torch.float16` are left alone (context rule 11).",
        before="import torch\nmodel = AutoModelForCausalLM.from_pretrained(name, dtype=torch.float16)\nmodel = model.half()\n",
        after="import torch\nmodel = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16)\nmodel = model.to(torch.bfloat16)\n",
    ),
    Rule(
        id="NM203",
        name="torch-dtype-kwarg",
        safety="safe",
        summary="`torch_dtype=` -> `dtype=` (transformers 5; diffusers loads only where the file requires 0.40+).",
        rationale="transformers 5 renamed the loading argument; `torch_dtype` still works with a "
        "deprecation warning. Keywords and `model_kwargs`-style dict keys are renamed unless the "
        "call already passes `dtype=`. diffusers loads are renamed only in a file that requires diffusers "
        '0.40 or later (`check_min_version("0.40.0")`): up to 0.39 diffusers ignores `dtype=` with a warning '
        "and loads in fp32, while `torch_dtype=` works on every release (docs/gaps.md, diffusers facts); in "
        "such a file the dict keys stay too, since they may feed a diffusers load.",
        before='model = AutoModelForCausalLM.from_pretrained(name, torch_dtype="auto")\n',
        after='model = AutoModelForCausalLM.from_pretrained(name, dtype="auto")\n',
    ),
    Rule(
        id="NM204",
        name="autocast",
        safety="unsafe",
        safety_reason="autocast computes in bf16, where CUDA autocast defaulted to fp16: numerics change",
        summary='CUDA autocast -> `torch.autocast("neuron", dtype=torch.bfloat16)`.',
        rationale='`torch.cuda.amp.autocast(...)`, `torch.autocast("cuda")` and '
        '`torch.amp.autocast(device_type="cuda")` target CUDA. AWS documents '
        '`torch.autocast(device_type="neuron")`; the dtype is stated explicitly because defaults '
        "follow CUDA conventions (fp16). Autocast on a device variable "
        "(`torch.autocast(accelerator.device.type)`) is already portable and left alone. A reference that "
        "is called later (`autocast = torch.cuda.amp.autocast if fp16 else nullcontext`) becomes "
        '`functools.partial(torch.autocast, "neuron", dtype=torch.bfloat16)`; so does a GradScaler '
        "reference (NM205).",
        before="import torch\nwith torch.cuda.amp.autocast():\n    loss = model(x)\n",
        after='import torch\nwith torch.autocast("neuron", dtype=torch.bfloat16):\n    loss = model(x)\n',
    ),
    Rule(
        id="NM205",
        name="grad-scaler",
        safety="unsafe",
        safety_reason="the disabled scaler no longer scales the loss or skips steps whose gradients overflowed",
        summary='CUDA GradScaler -> `torch.amp.GradScaler("neuron", enabled=False)`.',
        rationale="bf16 needs no loss scaling. A disabled scaler is a pass-through (`scale` returns "
        "the loss, `step` calls `optimizer.step()`), so the training loop stays as written.",
        before="import torch\nscaler = torch.cuda.amp.GradScaler()\n",
        after='import torch\nscaler = torch.amp.GradScaler("neuron", enabled=False)\n',
    ),
    Rule(
        id="NM206",
        name="tf32-flag",
        safety="safe",
        summary="Drop `tf32=True` from TrainingArguments and TRL configs.",
        rationale="`TrainingArguments(tf32=True)` raises `--tf32 requires Ampere` on any non-CUDA "
        "host. Backend attributes such as `torch.backends.cuda.matmul.allow_tf32 = True` are "
        "harmless no-ops and are left alone (in diffusers scripts NM132 removes them).",
        before='args = TrainingArguments(output_dir="out", tf32=True)\n',
        after='args = TrainingArguments(output_dir="out")\n',
    ),
)

_FP16_DTYPE_KWARGS = r"dtype|torch_dtype|bnb_4bit_compute_dtype|param_dtype|reduce_dtype|buffer_dtype|compute_dtype"


def _float16(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    if ctx.qualify(node) == "torch.float16" or ctx.qualify(node) == "torch.half":
        assert type(node) is cst.Attribute
        return node.with_changes(attr=cst.Name("bfloat16"))
    if type(node) is cst.SimpleString and string_value(node) in ("float16", "fp16"):
        return with_string_value(node, "bfloat16")
    return None


setting("NM202", _FP16_DTYPE_KWARGS, through(_float16), assign=False)  # context rule 11


def _mixed(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    if type(node) is cst.SimpleString and string_value(node) == "fp16":
        return with_string_value(node, "bf16")
    return None


setting("NM201", r"mixed_precision", through(_mixed))


def _is_config_call(node: cst.Call) -> bool:
    name = callee_name(node) or ""
    return name.endswith(("TrainingArguments", "Config")) or name == "dict"


@dataclass
class _References:
    # id of a partial -> (that partial, held so that its id is not reused by a later node; the original; the rule)
    written: dict[int, tuple[cst.BaseExpression, cst.Attribute, str]] = field(default_factory=dict)


@on("Attribute", "NM204", "NM205")
def cuda_amp_reference(node: cst.Attribute, ctx: FileContext) -> cst.BaseExpression:
    """`autocast = torch.cuda.amp.autocast if fp16 else nullcontext`: a reference, called later, as a call would be.

    `torch.cuda.amp.autocast` -> `functools.partial(torch.autocast, "neuron", dtype=torch.bfloat16)` (NM204),
    `torch.cuda.amp.GradScaler` -> `functools.partial(torch.amp.GradScaler, "neuron", enabled=False)` (NM205).
    Where the attribute turns out to be called, `precision_call` puts it back and rewrites the call instead.
    """
    if node.attr.value not in ("autocast", "GradScaler"):
        return node
    qualified = ctx.qualify(node)
    torch = _code(ctx.module_ref("torch"))
    if qualified == "torch.cuda.amp.autocast" and ctx.enabled("NM204"):
        rule_id, target = "NM204", f'{torch}.autocast, "neuron", dtype={torch}.bfloat16'
    elif qualified == "torch.cuda.amp.GradScaler" and ctx.enabled("NM205"):
        rule_id, target = "NM205", f'{torch}.amp.GradScaler, "neuron", enabled=False'
    else:
        return node
    new = cst.parse_expression(f"{_code(ctx.module_ref('functools'))}.partial({target})")
    family_state(ctx, "amp-references", _References).written[id(new)] = (new, node, rule_id)
    ctx.hit(rule_id)
    return new


@on("Module")
def unused_functools(node: cst.Module, ctx: FileContext) -> cst.Module:
    """Every `torch.cuda.amp` attribute was called after all: no `functools.partial` is left to import."""
    references = ctx.family_state.get("amp-references")
    if isinstance(references, _References) and not references.written:
        ctx.needed_imports.discard("functools")
    return node


@on("Call", "NM201", "NM202", "NM203", "NM204", "NM205", "NM206")
def precision_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    references = ctx.family_state.get("amp-references")
    if isinstance(references, _References) and id(node.func) in references.written:
        _, original, rule_id = references.written.pop(id(node.func))  # called: the call is rewritten as a whole
        ctx.frames[-1].hits[rule_id] -= 1
        node = node.with_changes(func=original)
    qualified = ctx.qualify(node.func)
    if qualified in (
        "torch.cuda.amp.autocast",
        "torch.autocast",
        "torch.amp.autocast",
        "torch.cpu.amp.autocast",
    ) and ctx.enabled("NM204"):
        return _autocast(node, qualified, ctx)
    if qualified in (
        "torch.cuda.amp.GradScaler",
        "torch.amp.GradScaler",
        "torch.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
    ) and ctx.enabled("NM205"):
        return _scaler(node, qualified, ctx)
    if method_of(node, "half") and not node.args and ctx.enabled("NM202"):
        assert type(node.func) is cst.Attribute
        ctx.hit("NM202")
        return node.with_changes(
            func=node.func.with_changes(attr=cst.Name("to")),
            args=[cst.Arg(cst.Attribute(value=ctx.module_ref("torch"), attr=cst.Name("bfloat16")))],
        )
    if _is_config_call(node):
        node = _fp16_flags(node, ctx)
        tf32 = kwarg(node, "tf32")
        if (
            tf32 is not None
            and ctx.enabled("NM206")
            and not (type(tf32.value) is cst.Name and tf32.value.value in ("False", "None"))
        ):
            ctx.hit("NM206")
            node = remove_arg(node, tf32)
    torch_dtype = kwarg(node, "torch_dtype")
    if (
        torch_dtype is not None
        and ctx.enabled("NM203")
        and kwarg(node, "dtype") is None
        and not (keeps_torch_dtype(ctx) and is_diffusers_load(node, ctx))
    ):
        ctx.hit("NM203")
        node = rename_kwarg(node, torch_dtype, "dtype")
    return node


def _fp16_flags(node: cst.Call, ctx: FileContext) -> cst.Call:
    fp16 = kwarg(node, "fp16")
    if fp16 is None or not ctx.enabled("NM201"):
        return node
    if type(fp16.value) is cst.Name and fp16.value.value in ("False", "None"):
        return node
    bf16 = kwarg(node, "bf16")
    ctx.hit("NM201")
    if bf16 is not None:
        node = replace_arg(node, bf16, bf16.with_changes(value=cst.Name("True")))
        fp16 = kwarg(node, "fp16")
        assert fp16 is not None
        return remove_arg(node, fp16)
    new = fp16.with_changes(keyword=cst.Name("bf16"), value=cst.Name("True"))
    return replace_arg(node, fp16, new)


def _autocast(node: cst.Call, qualified: str, ctx: FileContext) -> cst.BaseExpression:
    """`torch.cuda.amp.autocast(...)` is rebuilt; other forms keep their shape and gain a dtype."""
    bf16 = f"{_code(ctx.module_ref('torch'))}.bfloat16"
    if qualified == "torch.cuda.amp.autocast":
        ctx.hit("NM204")
        args = [a for a in node.args if not (a.keyword is not None and a.keyword.value == "dtype")]
        new = cst.parse_expression(f'{_code(ctx.module_ref("torch"))}.autocast("neuron", dtype={bf16})')
        assert type(new) is cst.Call
        for arg in args:
            if arg.keyword is not None:
                new = add_kwarg(new, arg.keyword.value, _code(arg.value))
        return new
    where = argument(node, 0, "device_type")
    if where is None or string_value(where.value) not in ("cuda", "neuron"):
        return node  # a device variable (`accelerator.device.type`) is already portable
    changed = False
    if string_value(where.value) == "cuda":
        assert type(where.value) is cst.SimpleString
        node = replace_arg(node, where, where.with_changes(value=with_string_value(where.value, "neuron")))
        changed = True
    if may_add(node, "dtype"):
        node = add_kwarg(node, "dtype", bf16)
        changed = True
    if changed:
        ctx.hit("NM204")
    return node


def _scaler(node: cst.Call, qualified: str, ctx: FileContext) -> cst.BaseExpression:
    positional = positional_args(node)
    device = kwarg(node, "device")
    if qualified != "torch.cuda.amp.GradScaler":
        value = positional[0].value if positional else (device.value if device else None)
        if value is not None and string_value(value) != "cuda":
            return node
        if value is None:
            pass  # torch.amp.GradScaler() defaults to "cuda"
    ctx.hit("NM205")
    return cst.parse_expression(f'{_code(ctx.module_ref("torch.amp"))}.GradScaler("neuron", enabled=False)')


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


_KWARGS_DICT = re.compile(r"\w*kwargs\w*|\w*_args")


@on("Subscript", "NM203")
def torch_dtype_subscript(node: cst.Subscript, ctx: FileContext) -> cst.Subscript:
    """`model_kwargs["torch_dtype"] = ...` (and reads of it) -> `model_kwargs["dtype"]`.

    Only dicts named like keyword bundles (`*kwargs*`, `*_args`): a `config["torch_dtype"]`
    read from a JSON file keeps its key.
    """
    if subscript_key(node) != "torch_dtype" or not ctx.enabled("NM203") or not matches(_KWARGS_DICT, node.value):
        return node
    if keeps_torch_dtype(ctx):
        return node
    index = node.slice[0].slice
    assert type(index) is cst.Index and type(index.value) is cst.SimpleString
    ctx.hit("NM203")
    key = index.with_changes(value=with_string_value(index.value, "dtype"))
    return node.with_changes(slice=[node.slice[0].with_changes(slice=key)])


@on("DictElement", "NM203")
def torch_dtype_key(node: cst.DictElement, ctx: FileContext) -> cst.DictElement:
    """`{"torch_dtype": ...}` in model kwargs dicts -> `{"dtype": ...}`."""
    if (
        type(node.key) is cst.SimpleString
        and string_value(node.key) == "torch_dtype"
        and ctx.enabled("NM203")
        and not keeps_torch_dtype(ctx)
    ):
        ctx.hit("NM203")
        return node.with_changes(key=with_string_value(node.key, "dtype"))
    return node
