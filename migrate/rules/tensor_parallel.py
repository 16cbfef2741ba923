"""NM521-NM523, NM922: tensor-parallel CUDA scripts -> transformers 5's `DistributedConfig`.

transformers 5.23's `PreTrainedModel.from_pretrained` still accepts `tp_plan=`/`tp_size=` but
only to build `DistributedConfig(tp_plan=tp_plan, tp_size=tp_size)` itself, with a
FutureWarning that `tp_plan` goes in v5.18, and it refuses both forms at once
(modeling_utils.py, `from_pretrained`: "Pass either `distributed_config` or the standalone
`tp_plan`/`tp_size` arguments, not both"). A `device_mesh=` passed next to them is replaced by
the mesh the config builds. The same `DistributedConfig` shards the model as DTensors on
TorchNeuron, so the rewrite only moves the arguments.

A model sharded at load time cannot checkpoint its optimizer: `Trainer.__init__` raises
"Resuming is not supported for models sharded at load time (`DistributedConfig`) ... Pass
`save_only_model=True` or `save_strategy='no'`" (trainer.py, transformers 5.23), hence NM522.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    code,
    has_star_kwargs,
    kwarg,
    method_of,
    on,
    remove_arg,
    string_value,
    with_string_value,
)
from migrate.rules.todo_catalogue import todo

_TP_KWARGS = ("tp_plan", "tp_size", "device_mesh")
_TP_FILE = re.compile(r"\b(?:tp_plan|tp_size|device_mesh|distributed_config)\s*=")
_ARGUMENT_CLASSES = frozenset(
    {
        "transformers.TrainingArguments",
        "transformers.Seq2SeqTrainingArguments",
        "trl.SFTConfig",
        "trl.DPOConfig",
        "trl.GRPOConfig",
        "trl.KTOConfig",
        "trl.RewardConfig",
        "trl.RLOOConfig",
    }
)
_MESH_FACTORIES = frozenset({"torch.distributed.device_mesh.init_device_mesh", "torch.distributed.init_device_mesh"})
_CONSOLIDATE = re.compile(r"^optimum\.neuron\..*consolidate\w*$")
RULES: tuple[Rule, ...] = (
    Rule(
        id="NM521",
        name="tp-distributed-config",
        summary='`from_pretrained(..., tp_plan="auto", tp_size=N, device_mesh=m)` -> '
        "`distributed_config=DistributedConfig(tp_size=N)`.",
        rationale="transformers 5.23 builds `DistributedConfig(tp_plan=, tp_size=)` from the old keywords with a "
        "FutureWarning (`tp_plan` is to go) and replaces a `device_mesh=` passed with them by the mesh that "
        "config builds; `DistributedConfig` is also what shards a model as DTensors on TorchNeuron. "
        '`tp_plan="auto"` with a size is the config\'s default plan and is dropped; a dict plan moves along. '
        "A `device_mesh=` alone becomes the size of its `tp` dimension (the whole mesh when it is 1-D), as "
        "the docstring of `from_pretrained` describes it; other dimensions of that mesh need "
        "`fsdp_size`/`dp_replicate_size`, which the report points out.",
        before="from transformers import AutoModelForCausalLM\n"
        'model = AutoModelForCausalLM.from_pretrained("gpt2", tp_plan="auto", tp_size=2)\n',
        after="from transformers import AutoModelForCausalLM\nfrom transformers.distributed import DistributedConfig\n"
        'model = AutoModelForCausalLM.from_pretrained("gpt2", distributed_config=DistributedConfig(tp_size=2))\n',
        safety="safe",
    ),
    Rule(
        id="NM522",
        name="tp-save-only-model",
        summary="Training arguments of a tensor-parallel script get `save_only_model=True`.",
        rationale="`Trainer` refuses a model sharded at load time (`DistributedConfig`) unless checkpoints skip "
        'the optimizer: "Resuming is not supported for models sharded at load time ... Pass '
        "`save_only_model=True` or `save_strategy='no'`\" (transformers 5.23 trainer.py). Applies to "
        "`TrainingArguments` and TRL configs in a file that loads with `tp_plan`/`tp_size`/`device_mesh`/"
        '`distributed_config`, unless `save_strategy="no"` or `save_only_model` is given.',
        before="from transformers import AutoModelForCausalLM, TrainingArguments\n"
        'model = AutoModelForCausalLM.from_pretrained("gpt2", distributed_config=config)\n'
        'args = TrainingArguments(output_dir="out")\n',
        after="from transformers import AutoModelForCausalLM, TrainingArguments\n"
        'model = AutoModelForCausalLM.from_pretrained("gpt2", distributed_config=config)\n'
        'args = TrainingArguments(output_dir="out", save_only_model=True)\n',
        safety="unsafe",
        safety_reason="checkpoints no longer hold optimizer and scheduler state: a run cannot resume from them",
    ),
    Rule(
        id="NM523",
        name="device-mesh-type",
        summary='`init_device_mesh("cuda", ...)` -> `init_device_mesh("neuron", ...)`.',
        rationale="A device mesh names the device type its ranks use; a tensor-parallel script builds it for "
        "`device_mesh=` (NM521) or for DTensor code of its own. On TorchNeuron each rank's device is its "
        "own NeuronCore, which the `neuron` process group serves.",
        before='from torch.distributed.device_mesh import init_device_mesh\nmesh = init_device_mesh("cuda", (4,))\n',
        after='from torch.distributed.device_mesh import init_device_mesh\nmesh = init_device_mesh("neuron", (4,))\n',
        safety="safe",
    ),
)


@on("Call", "NM521", "NM522", "NM523", "NM922")
def tensor_parallel_call(node: cst.Call, ctx: FileContext) -> cst.CSTNode:
    """NM521 on `from_pretrained`, NM522 on training arguments, NM922 on consolidation calls."""
    qualified = ctx.qualify(node.func) or ""
    if qualified in _MESH_FACTORIES and ctx.enabled("NM523"):
        return _mesh_device(node, ctx)
    if _CONSOLIDATE.match(qualified):
        todo(ctx, "NM922")
        return node
    if method_of(node, "from_pretrained") and ctx.enabled("NM521"):
        return _distributed_config(node, ctx)
    if qualified in _ARGUMENT_CLASSES and ctx.enabled("NM522") and _TP_FILE.search(ctx.text):
        return _save_only_model(node, ctx)
    return node


def _distributed_config(node: cst.Call, ctx: FileContext) -> cst.Call:
    found = {name: kwarg(node, name) for name in _TP_KWARGS}
    if not any(found.values()) or kwarg(node, "distributed_config") is not None:
        return node
    plan, size, mesh = (found[name] for name in _TP_KWARGS)
    fields: list[str] = []
    if plan is not None and (string_value(plan.value) != "auto" or size is None):
        fields.append(f"tp_plan={code(plan.value)}")
    if size is not None:
        fields.append(f"tp_size={code(size.value)}")
    elif mesh is not None and plan is None:
        name = code(mesh.value)
        fields.append(f'tp_size={name}.size() if {name}.ndim == 1 else {name}["tp"].size()')
        ctx.warn(
            "NM521",
            f"device_mesh={name} became its tp size: set fsdp_size/dp_replicate_size on the "
            "DistributedConfig for its other dimensions",
        )
    if mesh is not None and (plan is not None or size is not None):
        ctx.warn(
            "NM521",
            f"removed device_mesh={code(mesh.value)}: transformers replaces it by the mesh "
            "DistributedConfig builds over the world",
        )
    for arg in (plan, size, mesh):
        if arg is not None and arg.keyword is not None:  # always keyword: found by kwarg()
            keyword = arg.keyword.value
            node = remove_arg(node, next(a for a in node.args if a.keyword and a.keyword.value == keyword))
    config = ctx.name_ref("transformers.distributed", "DistributedConfig")
    ctx.hit("NM521")
    return add_kwarg(node, "distributed_config", f"{config}({', '.join(fields)})")


def _save_only_model(node: cst.Call, ctx: FileContext) -> cst.Call:
    strategy = kwarg(node, "save_strategy")
    if (
        kwarg(node, "save_only_model") is not None
        or has_star_kwargs(node)
        or (strategy is not None and string_value(strategy.value) == "no")
    ):
        return node
    ctx.hit("NM522")
    ctx.warn(
        "NM522",
        "save_only_model=True: Trainer refuses optimizer checkpoints of a model sharded at load "
        "time (DistributedConfig); a run cannot resume from these checkpoints",
    )
    return add_kwarg(node, "save_only_model", "True")


def _mesh_device(node: cst.Call, ctx: FileContext) -> cst.Call:
    """NM523: the mesh's device type `"cuda"` (first argument or `device_type=`) -> `"neuron"`."""
    for arg in node.args:
        positional = arg.keyword is None and arg is node.args[0]
        if positional or (arg.keyword is not None and arg.keyword.value == "device_type"):
            if type(arg.value) is cst.SimpleString and string_value(arg.value) == "cuda":
                ctx.hit("NM523")
                neuron = arg.with_changes(value=with_string_value(arg.value, "neuron"))
                return node.with_changes(args=[neuron if a is arg else a for a in node.args])
    return node
