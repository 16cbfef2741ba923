"""NM209-NM211 quantization: QLoRA -> bf16 LoRA, 8-bit/paged optimizers, k-bit preparation.

docs/rules.md (NM209-NM211), docs/gaps.md#quantization; quantization removal is coupled: bitsandbytes kernels do
not run on Trainium, so the 4/8-bit load is dropped, the model loads in bf16, and the TODO
NM908 above the `BitsAndBytesConfig(...)` says the memory cost changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    HookResult,
    add_kwarg,
    argument,
    callee_name,
    code,
    family_state,
    has_star_kwargs,
    kwarg,
    matches,
    on,
    remove_arg,
    replace_arg,
    string_value,
    with_string_value,
    wrap_long,
)
from migrate.rules.diffusers_common import dtype_keyword, is_diffusers_load
from migrate.rules.retired import retire, retire_reads
from migrate.rules.settings import setting, subscript_key, through
from migrate.rules.todo_catalogue import BNB_LEFT, quantized_load_message, todo

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM209",
        name="drop-bnb-quantization",
        safety="unsafe",
        safety_reason="the model loads unquantized in bf16: about 2-4x the weight memory, and numerics differ",
        summary="Remove `quantization_config=`/`load_in_4bit`/`load_in_8bit` from model loads; load in bf16.",
        rationale="bitsandbytes has no Neuron kernels. QLoRA becomes bf16 LoRA: the quantized load "
        "arguments are removed and `dtype=torch.bfloat16` is added when no dtype is given. Weights "
        "then take about 4x (4-bit) or 2x (8-bit) more memory, so the TODO NM908 on the config "
        "suggests FSDP or more NeuronCores. Where the load was quantized only sometimes (a config "
        "that is `None` on the default path, TRL's `get_quantization_config(args)`, "
        '`load_in_8bit=args.load_8bit`), the dtype follows: `torch.bfloat16 if ... else "auto"`, so the '
        "default path keeps transformers' default dtype. bitsandbytes' quantized layer classes "
        "(`bnb.nn.Linear4bit`, `Linear8bitLt`, as QLoRA scripts look up LoRA's target modules) are "
        "`torch.nn.Linear` on the unquantized model; and `import bitsandbytes` goes once nothing uses "
        "it (with the `try:`/`except ImportError:` around it).",
        before="import torch\nbnb_config = BitsAndBytesConfig(load_in_4bit=True)\n"
        "model = AutoModelForCausalLM.from_pretrained(name, quantization_config=bnb_config)\n"
        "ref = AutoModel.from_pretrained(name, load_in_8bit=q8)\n",
        after="import torch\nbnb_config = BitsAndBytesConfig(load_in_4bit=True)\n"
        "model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16)\n"
        'ref = AutoModel.from_pretrained(name, dtype=torch.bfloat16 if q8 else "auto")\n',
    ),
    Rule(
        id="NM210",
        name="bnb-optimizer",
        safety="unsafe",
        safety_reason="full-precision AdamW state takes more memory than 8-bit or paged state, and updates differ "
        "slightly",
        summary="8-bit and paged optimizers -> `adamw_torch`; `bnb.optim.AdamW8bit` -> `torch.optim.AdamW`.",
        rationale="`paged_adamw_8bit`, `paged_adamw_32bit`, `adamw_bnb_8bit`, `adamw_8bit`, "
        "`paged_lion_*` need bitsandbytes. Plain AdamW keeps the optimizer semantics; its state "
        "takes more memory. Keywords, argparse and dataclass `optim` defaults are rewritten.",
        before='args = TrainingArguments(output_dir="out", optim="paged_adamw_8bit")\n',
        after='args = TrainingArguments(output_dir="out", optim="adamw_torch")\n',
    ),
    Rule(
        id="NM211",
        name="kbit-preparation",
        safety="unsafe",
        safety_reason="peft's fp32 casting of the model's parameters no longer happens: numerics and memory change",
        summary="`model = prepare_model_for_kbit_training(model, ...)` -> gradient checkpointing + input grads.",
        rationale="On a model that is no longer quantized, peft's k-bit preparation casts every "
        "bf16 parameter to fp32, doubling memory. What LoRA still needs from it is gradient "
        "checkpointing (if it was on) and `enable_input_require_grads()`.",
        before="model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)\n",
        after="model.gradient_checkpointing_enable()\nmodel.enable_input_require_grads()\n",
    ),
)

_BNB_OPTIMS = (
    "paged_adamw",
    "adamw_bnb",
    "adamw_8bit",
    "paged_lion",
    "lion_8bit",
    "rmsprop_bnb",
    "paged_ademamix",
    "ademamix_8bit",
    "adamw_torch_4bit",
)


def _optim(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    text = string_value(node)
    if text is not None and text.startswith(_BNB_OPTIMS):
        return with_string_value(node, "adamw_torch")  # type: ignore[arg-type]
    return None


setting("NM210", r"optim|optimizer_name|optim_name", through(_optim))

_LOADERS = ("from_pretrained", "dict")
_QUANTIZED_KEYS = ("quantization_config", "load_in_4bit", "load_in_8bit")
_KWARGS_DICT = re.compile(r"\w*kwargs\w*|\w*_args")


def _is_loader(node: cst.Call, ctx: FileContext) -> bool:
    """A model load, a `dict(...)` of load keywords, or any TRL trainer (they load by model id)."""
    name = callee_name(node)
    if name in _LOADERS:
        return True
    return name is not None and name.endswith("Trainer") and (ctx.qualify(node.func) or "trl.").startswith("trl.")


def _without_quantized_keys(node: cst.Dict, ctx: FileContext) -> cst.Dict | None:
    """The dict literal without its bitsandbytes load keys, or None when it has none."""
    keep = [
        e
        for e in node.elements
        if not (
            type(e) is cst.DictElement
            and string_value(e.key) in _QUANTIZED_KEYS
            and not (type(e.value) is cst.Name and e.value.value in ("False", "None"))
        )
    ]
    if len(keep) == len(node.elements):
        return None
    ctx.hit("NM209")
    if keep and node.elements[-1] not in keep:
        keep[-1] = keep[-1].with_changes(comma=node.elements[-1].comma)
    return node.with_changes(elements=keep)


@on("Assign", "NM209")
def quantized_kwargs_dict(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """`model_kwargs = {"quantization_config": q, ...}`: the keys go, the dict stays."""
    if type(node.value) is not cst.Dict or len(node.targets) != 1 or not ctx.enabled("NM209"):
        return node
    if not matches(_KWARGS_DICT, node.targets[0].target):
        return node
    pruned = _without_quantized_keys(node.value, ctx)
    return node if pruned is None else node.with_changes(value=pruned)


@on("SimpleStatementLine", "NM209", "NM908")
def quantized_key_assignment(node: cst.SimpleStatementLine, ctx: FileContext) -> HookResult:
    """`model_kwargs["quantization_config"] = bnb_config` goes, like the keyword it becomes.

    Only dicts named like keyword bundles (`*kwargs*`, `*_args`), and not `= None`/`= False`.
    """
    if len(node.body) != 1 or type(node.body[0]) is not cst.Assign or not ctx.enabled("NM209"):
        return node
    assign = node.body[0]
    target = assign.targets[0].target
    if len(assign.targets) != 1 or subscript_key(target) not in _QUANTIZED_KEYS:
        return node
    assert type(target) is cst.Subscript
    off = type(assign.value) is cst.Name and assign.value.value in ("False", "None")
    if not matches(_KWARGS_DICT, target.value) or off:
        return node
    ctx.hit("NM209")
    if subscript_key(target) != "quantization_config" and ctx.enabled("NM908"):
        ctx.todo("NM908", quantized_load_message((subscript_key(target) or "").removeprefix("load_in_")))
    if any(line.comment is not None for line in node.leading_lines):
        return node.with_changes(body=[cst.Pass()])  # keep the comments above it
    return cst.RemoveFromParent()


@on("Call", "NM209", "NM210", "NM908")
def drop_quantization(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    layers = ctx.family_state.get("bnb-layers")
    if isinstance(layers, _Layers) and id(node.func) in layers.replaced:
        # constructing a quantized layer takes bitsandbytes' own arguments: `torch.nn.Linear` would not accept them
        ctx.frames[-1].hits["NM209"] -= 1
        todo(ctx, "NM908", BNB_LEFT)
        return node.with_changes(func=layers.replaced.pop(id(node.func))[1])
    qualified = ctx.qualify(node.func) or ""
    if qualified.startswith("bitsandbytes.optim.") and ctx.enabled("NM210"):
        ctx.hit("NM210")
        retire(ctx, "bitsandbytes")
        return node.with_changes(func=cst.Attribute(value=ctx.module_ref("torch.optim"), attr=cst.Name("AdamW")))
    if not ctx.enabled("NM209"):
        return node
    for arg in node.args:  # `SFTConfig(model_init_kwargs={"quantization_config": q})`
        if arg.keyword is not None and matches(_KWARGS_DICT, arg.keyword) and type(arg.value) is cst.Dict:
            pruned = _without_quantized_keys(arg.value, ctx)
            if pruned is not None:
                node = replace_arg(node, arg, arg.with_changes(value=pruned))
    if not _is_loader(node, ctx):
        return node
    conditions: list[str | None] = []  # per removed argument: when it quantized (None: always)
    for name in ("quantization_config", "load_in_4bit", "load_in_8bit"):
        setting = kwarg(node, name)
        if setting is not None and not (type(setting.value) is cst.Name and setting.value.value in ("False", "None")):
            node = remove_arg(node, setting)
            retire_reads(ctx, setting.value)  # `BitsAndBytesConfig(...)`, TRL's `get_quantization_config(args)`
            conditions.append(_quantized_when(name, setting.value, ctx))
            if name != "quantization_config" and ctx.enabled("NM908"):  # no BitsAndBytesConfig carries the TODO
                ctx.todo("NM908", quantized_load_message(name.removeprefix("load_in_")))
    if not conditions:
        return node
    ctx.hit("NM209")
    if (
        callee_name(node) == "from_pretrained"
        and kwarg(node, "dtype") is None
        and kwarg(node, "torch_dtype") is None
        and not has_star_kwargs(node)  # `**kwargs` may already carry a dtype
    ):
        bf16 = f"{code(ctx.module_ref('torch'))}.bfloat16"
        keyword = dtype_keyword(node, ctx)
        if None in conditions:
            node = add_kwarg(node, keyword, bf16)
        else:  # the unquantized path keeps the library's default: transformers' "auto", diffusers' None (fp32)
            when = " or ".join(c for c in conditions if c is not None)
            default = "None" if is_diffusers_load(node, ctx) else '"auto"'
            node = wrap_long(add_kwarg(node, keyword, f"{bf16} if {when} else {default}"))
    return node


def _quantized_when(name: str, value: cst.BaseExpression, ctx: FileContext) -> str | None:
    """When the removed argument quantized the load, as source text; None when it always did.

    `quantization_config=BitsAndBytesConfig(...)`, a name only ever bound to a `...Config(...)` call, and
    `load_in_4bit=True` always quantize; `bnb_config = None` / `if use_bnb: bnb_config = BitsAndBytesConfig(...)`,
    TRL's `get_quantization_config(args)` (None unless asked) and `load_in_8bit=args.load_8bit` only sometimes.
    """
    if name != "quantization_config":
        return None if type(value) is cst.Name and value.value == "True" else code(value)
    if type(value) is cst.Call and (callee_name(value) or "").endswith("Config"):
        return None
    if type(value) is cst.Name:
        bound = re.findall(rf"^[ \t]*{value.value}[ \t]*(?::[^=\n]+)?=(?!=)[ \t]*([^\n]*)", ctx.text, re.M)
        if bound and all(re.match(r"[\w.]*Config\(", rhs) for rhs in bound):
            return None
    if type(value) is cst.IfExp and type(value.orelse) is cst.Name and value.orelse.value == "None":
        return code(value.test)
    return f"{code(value)} is not None"


# bitsandbytes' quantized linear layers: the model now loads unquantized, so its layers are `torch.nn.Linear`
_BNB_LINEAR = frozenset(
    f"bitsandbytes.nn.{name}" for name in ("Linear4bit", "Linear8bitLt", "LinearFP4", "LinearNF4", "Linear8bit")
)


@dataclass
class _Layers:
    # id of a `torch.nn.Linear` written -> (that node, held so that its id is not reused by a later node; the original)
    replaced: dict[int, tuple[cst.Attribute, cst.Attribute]] = field(default_factory=dict)


@on("Attribute", "NM209", "NM210")
def bnb_optimizer_reference(node: cst.Attribute, ctx: FileContext) -> cst.BaseExpression:
    """`optimizer_cls = bnb.optim.AdamW8bit` (diffusers) -> `torch.optim.AdamW`; `bnb.nn.Linear4bit` -> `torch.nn.Linear`.

    A QLoRA script finds LoRA's target modules with `isinstance(module, bnb.nn.Linear4bit)`; on the
    bf16 model NM209 loads, no module is one, and PEFT finds nothing to adapt.
    """
    optimizer = node.attr.value.endswith(("8bit", "32bit"))
    if not optimizer and not node.attr.value.startswith("Linear"):
        return node
    qualified = ctx.qualify(node) or ""
    if optimizer and ctx.enabled("NM210") and qualified.startswith("bitsandbytes.optim."):
        ctx.hit("NM210")
        retire(ctx, "bitsandbytes")
        return cst.Attribute(value=ctx.module_ref("torch.optim"), attr=cst.Name("AdamW"))
    if qualified in _BNB_LINEAR and ctx.enabled("NM209"):
        ctx.hit("NM209")
        retire(ctx, "bitsandbytes")
        new = cst.Attribute(value=ctx.module_ref("torch.nn"), attr=cst.Name("Linear"))
        family_state(ctx, "bnb-layers", _Layers).replaced[id(new)] = (new, node)
        return new
    return node


@on("SimpleStatementLine", "NM211")
def kbit_preparation(node: cst.SimpleStatementLine, ctx: FileContext) -> HookResult:
    if len(node.body) != 1 or not ctx.enabled("NM211"):
        return node
    small = node.body[0]
    value = small.value if isinstance(small, (cst.Assign, cst.Expr)) else None
    if type(value) is not cst.Call or callee_name(value) not in (
        "prepare_model_for_kbit_training",
        "prepare_model_for_int8_training",
    ):
        return node
    model_arg = argument(value, 0, "model")
    if model_arg is None:
        return node
    model = cst.Module([]).code_for_node(model_arg.value)
    use_gc = kwarg(value, "use_gradient_checkpointing")
    gc_kwargs = kwarg(value, "gradient_checkpointing_kwargs")
    lines = []
    if use_gc is None or not (type(use_gc.value) is cst.Name and use_gc.value.value == "False"):
        extra = f"gradient_checkpointing_kwargs={cst.Module([]).code_for_node(gc_kwargs.value)}" if gc_kwargs else ""
        call = f"{model}.gradient_checkpointing_enable({extra})"
        if use_gc is not None and type(use_gc.value) is not cst.Name:
            call = f"if {cst.Module([]).code_for_node(use_gc.value)}:\n    {call}"
        lines.append(call)
    lines.append(f"{model}.enable_input_require_grads()")
    statements = [cst.parse_statement(line) for line in lines]
    statements[0] = statements[0].with_changes(leading_lines=node.leading_lines)
    ctx.hit("NM211")
    qualified = ctx.qualify(value.func)
    if qualified is not None:  # PEFT removed `prepare_model_for_int8_training`: its import would fail
        retire(ctx, qualified)
    return cst.FlattenSentinel(statements)
