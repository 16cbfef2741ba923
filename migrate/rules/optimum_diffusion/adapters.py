"""NM533: Optimum's export arguments that load more weights (`lora_*`, `ip_adapter_*`, `controlnet_ids`,
`unet_id`) become the diffusers calls that load them, written after the pipeline's load, since a native pipeline
loads them on the instance rather than at export.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    code,
)
from migrate.rules.todo_catalogue import todo

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM533",
        name="diffusion-adapters",
        safety="safe",
        summary="`lora_*`, `ip_adapter_*`, `controlnet_ids`, `unet_id` export arguments -> the diffusers calls "
        "that load them.",
        rationale="Optimum fused these into the compiled components at export. Natively `controlnet_ids` and "
        "`unet_id` are models passed to the pipeline (`controlnet=ControlNetModel.from_pretrained(id)`, "
        "`unet=UNet2DConditionModel.from_pretrained(id)`), LoRA weights are loaded with "
        "`load_lora_weights(id, weight_name=, adapter_name=)` and weighted with `set_adapters`, IP-adapters with "
        "`load_ip_adapter` and `set_ip_adapter_scale`, all before the compile lines so the compiled graphs "
        "include them. A ControlNet id held in a variable is taken as one id; LoRA ids held in a variable, "
        "lists of unequal length and LoRA on a sharded transformer get TODO NM919.",
        before="import torch\nfrom optimum.neuron import NeuronStableDiffusionXLPipeline\n"
        "pipe = NeuronStableDiffusionXLPipeline.from_pretrained(\n    model_id,\n    export=True,\n"
        '    lora_model_ids="org/lora",\n    lora_weight_names="lora.safetensors",\n'
        '    lora_adapter_names="style",\n    lora_scales=0.8,\n)\n',
        after="import torch\nfrom optimum.neuron import NeuronStableDiffusionXLPipeline\n"
        "pipe = NeuronStableDiffusionXLPipeline.from_pretrained(\n    model_id,\n    export=True,\n)\n"
        'pipe.load_lora_weights("org/lora", weight_name="lora.safetensors", adapter_name="style")\n'
        'pipe.set_adapters(["style"], adapter_weights=[0.8])\n',
    ),
)
_LORA = ("lora_model_ids", "lora_weight_names", "lora_adapter_names", "lora_scales")
_IP_ADAPTER = ("ip_adapter_ids", "ip_adapter_subfolders", "ip_adapter_weight_names", "ip_adapter_scales")
_MODELS = ("controlnet_ids", "unet_id")
_ADAPTERS = _LORA + _IP_ADAPTER + _MODELS


def _items(value: cst.BaseExpression | None) -> list[cst.BaseExpression] | None:
    """The elements of a list/tuple literal, `[value]` for any other expression, None for no value."""
    if value is None:
        return None
    if isinstance(value, cst.List | cst.Tuple):
        return [element.value for element in value.elements]
    return [value]


def _model_kwargs(
    node: cst.Call, adapters: dict[str, cst.BaseExpression], dtype: tuple[str, str], ctx: FileContext
) -> cst.Call:
    """NM533 `controlnet_ids=` / `unet_id=` -> `controlnet=ControlNetModel.from_pretrained(...)` / `unet=...`."""
    keyword, value = dtype
    for option, name, cls in (
        ("controlnet_ids", "controlnet", "ControlNetModel"),
        ("unet_id", "unet", "UNet2DConditionModel"),
    ):
        ids = adapters.get(option)
        items = _items(ids)
        if ids is None or items is None:
            continue
        local = ctx.name_ref("diffusers", cls)
        loads = [f"{local}.from_pretrained({code(item)}, {keyword}={value})" for item in items]
        node = add_kwarg(node, name, f"[{', '.join(loads)}]" if isinstance(ids, cst.List | cst.Tuple) else loads[0])
        ctx.hit("NM533")
    return node


def _adapter_lines(
    adapters: dict[str, cst.BaseExpression], tp: bool, ctx: FileContext
) -> tuple[list[str], tuple[str, ...]]:
    """NM533: LoRA and IP-adapter loads, in the order Optimum applied them (before compiling), and the
    export arguments they replace. Arguments that cannot be mapped stay in the call beside their TODO."""
    pipe = _PIPE
    lines: list[str] = []
    mapped: list[str] = [name for name in _MODELS if name in adapters]
    ids = _items(adapters.get("lora_model_ids"))
    if ids is not None and tp:
        todo(
            ctx,
            "NM919",
            "LoRA cannot be loaded into a sharded transformer: fuse it (pipe.fuse_lora()) in an unsharded run and load the fused weights",
        )
    elif ids is not None:
        weights, names, scales = (_items(adapters.get(k)) for k in _LORA[1:])
        listed = isinstance(adapters["lora_model_ids"], cst.List | cst.Tuple | cst.SimpleString)
        if not listed or any(v is not None and len(v) != len(ids) for v in (weights, names, scales)):
            todo(
                ctx,
                "NM919",
                "map lora_model_ids/lora_weight_names/lora_adapter_names/lora_scales to pipe.load_lora_weights(...) and pipe.set_adapters(...) by hand",
            )
        else:
            if scales is not None and names is None:
                names = [cst.SimpleString(f'"lora_{i}"') for i in range(len(ids))]
            for i, lora in enumerate(ids):
                extra = "".join(
                    f", {keyword}={code(values[i])}"
                    for keyword, values in (("weight_name", weights), ("adapter_name", names))
                    if values is not None
                )
                lines.append(f"{pipe}.load_lora_weights({code(lora)}{extra})")
            if scales is not None and names is not None:
                lines.append(
                    f"{pipe}.set_adapters([{', '.join(code(n) for n in names)}], "
                    f"adapter_weights=[{', '.join(code(s) for s in scales)}])"
                )
            mapped += [name for name in _LORA if name in adapters]
    ip = adapters.get("ip_adapter_ids")
    if ip is not None:
        subfolder, weight_name = adapters.get("ip_adapter_subfolders"), adapters.get("ip_adapter_weight_names")
        if subfolder is None or weight_name is None:
            todo(
                ctx,
                "NM919",
                "pipe.load_ip_adapter(...) needs the subfolder and weight_name of each IP-adapter: add them",
            )
        else:
            lines.append(
                f"{pipe}.load_ip_adapter({code(ip)}, subfolder={code(subfolder)}, weight_name={code(weight_name)})"
            )
            scale = adapters.get("ip_adapter_scales")
            if scale is not None:
                lines.append(f"{pipe}.set_ip_adapter_scale({code(scale)})")
            mapped += [name for name in _IP_ADAPTER if name in adapters]
    return lines, tuple(mapped)


_PIPE = "\x00pipe\x00"  # the pipeline's name in adapter lines written before the statement names it
