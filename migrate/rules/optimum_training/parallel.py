"""NM505/NM506: Optimum's tensor-parallel settings (`trn_config`, `TrainingNeuronConfig`,
`tensor_parallel_size` on the command line) become a transformers `DistributedConfig`, and its custom training
model classes take it through `from_pretrained`, since native tensor parallelism is configured at the load.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    assignment,
    callee_name,
    code,
    kwarg,
    on,
    positional_args,
    remove_arg,
    replace_arg,
)
from migrate.rules.optimum_training.state import _is_one, _qualified_name, _state
from migrate.rules.removal import Removal, removable
from migrate.rules.todo_catalogue import todo

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM505",
        name="distributed-config",
        safety="unsafe",
        safety_reason="the data-parallel rest of the mesh becomes FSDP, which shards parameters and optimizer state",
        summary="`TrainingNeuronConfig`/`ModelParallelismPlugin`/`tensor_parallel_size` -> `DistributedConfig(tp_size, fsdp_size)`.",
        rationale="Native tensor parallelism is chosen at load time: `from_pretrained(..., "
        "distributed_config=DistributedConfig(tp_size=N, fsdp_size=WORLD_SIZE // N))`. Optimum's "
        "data-parallel degree was implicit (world / tp); natively the mesh must cover `WORLD_SIZE`, "
        "so the rest becomes FSDP, which also shards what ZeRO-1 sharded. The custom models' "
        "`trn_config` argument becomes `distributed_config=`; a Trainer on a sharded model refuses "
        "optimizer checkpoints, so the arguments get `save_only_model=True`.",
        before="from optimum.neuron.models.training import NeuronModelForCausalLM, TrainingNeuronConfig\n"
        "trn_config = TrainingNeuronConfig(tensor_parallel_size=8)\n"
        "model = NeuronModelForCausalLM.from_pretrained(model_id, trn_config)\n",
        after="import os\nfrom transformers.distributed import DistributedConfig\n"
        "from optimum.neuron.models.training import NeuronModelForCausalLM\n"
        'trn_config = DistributedConfig(\n    tp_size=8,\n    fsdp_size=int(os.environ.get("WORLD_SIZE", 1)) // 8,\n)\n'
        "model = NeuronModelForCausalLM.from_pretrained(model_id, distributed_config=trn_config)\n",
    ),
    Rule(
        id="NM506",
        name="training-model-classes",
        safety="unsafe",
        safety_reason="standard transformers modules replace the NxD layers and NKI kernels: speed and memory change",
        summary="`optimum.neuron.models.training` model classes -> transformers; the `trn_config` argument moves.",
        rationale="The custom training models (NxD layers, NKI flash attention) have no native "
        "counterpart and need none: `AutoModelForCausalLM` (or `LlamaForCausalLM`, "
        "`Qwen3ForCausalLM`, `GraniteForCausalLM`) loads the same checkpoint. The second "
        "positional `trn_config` becomes `distributed_config=`; their `flash_attention_2` is "
        "Optimum's NKI kernel and becomes `sdpa` (NM207).",
        before="from optimum.neuron.models.training import NeuronModelForCausalLM\n"
        "model = NeuronModelForCausalLM.from_pretrained(model_id)\n",
        after="from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained(model_id)\n",
    ),
)


_TP_CONFIG = re.compile(r"\b(?:TrainingNeuronConfig|ModelParallelismPlugin)\(")
_TP_LITERAL = re.compile(r"\btensor_parallel_size\s*=\s*(\d+)")
_CLI_PARSED = re.compile(r"HfArgumentParser\(")
_NEURON_ARGS = re.compile(r"\b(?:Seq2Seq)?Neuron(?:TrainingArguments|SFTConfig)\b")


def _distributed_config(ctx: FileContext, tp: cst.BaseExpression | None, func: cst.BaseExpression) -> cst.Call:
    """`DistributedConfig(tp_size=tp, fsdp_size=WORLD_SIZE // tp)`: the mesh must cover every rank."""
    world = f'int({code(ctx.module_ref("os"))}.environ.get("WORLD_SIZE", 1))'
    if tp is None:
        text = f"X(fsdp_size={world})"
    else:
        tp_code = code(tp)
        divisor = tp_code if type(tp) in (cst.Name, cst.Attribute, cst.Integer) else f"({tp_code})"
        text = f"X(tp_size={tp_code}, fsdp_size={world} // {divisor})"
    call = cst.parse_expression(text)
    assert type(call) is cst.Call
    return call.with_changes(func=func)


def _training_model(node: cst.Call, ctx: FileContext) -> cst.Call:
    """`from_pretrained(model_id, trn_config, ...)`: the config becomes `distributed_config=`."""
    positional = positional_args(node)
    if len(positional) < 2 or kwarg(node, "distributed_config") is not None:
        return node
    config = positional[1]
    state = _state(ctx)
    from_cli = (type(config.value) is cst.Attribute and config.value.attr.value == "trn_config") or (
        type(config.value) is cst.Name and config.value.value in state.cli_config
    )
    if from_cli:
        replacement = _literal_tp_config(ctx)
        if replacement is None:
            todo(ctx, "NM914")
            if not ctx.enabled("NM505"):
                return node
            ctx.hit("NM505")
            return remove_arg(node, config)
        config = config.with_changes(value=replacement)
    if not ctx.enabled("NM505") or len(positional) > 2:
        return node
    ctx.hit("NM505")
    moved = config.with_changes(
        keyword=cst.Name("distributed_config"),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    return replace_arg(node, positional[1], moved)


def _literal_tp_config(ctx: FileContext) -> cst.BaseExpression | None:
    """A `DistributedConfig(...)` for `<args>.trn_config` when the script fixes the degree itself.

    The degree comes from a `tensor_parallel_size=` seen earlier in a training-arguments call, or
    from a single integer literal anywhere in the file; one parsed from the command line is not
    known to the code here (TODO NM914).
    """
    tp = _state(ctx).tp
    if tp is None:
        literals = set(_TP_LITERAL.findall(ctx.text))
        if len(literals) != 1:
            return None
        tp = cst.Integer(literals.pop())
    if _is_one(tp) or not ctx.enabled("NM505"):
        return None
    func = cst.Name(ctx.name_ref("transformers.distributed", "DistributedConfig"))
    return _distributed_config(ctx, tp, func)


@on("Assign")
def trn_config_binding(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """Remember names bound to a DistributedConfig or to the CLI-parsed `<args>.trn_config`."""
    state = _state(ctx)
    dropped, state.dropped = state.dropped, {}
    if len(node.targets) != 1 or type(node.targets[0].target) is not cst.Name:
        return node
    target = node.targets[0].target.value
    state.removed_fields.pop(target, None)
    if dropped and type(node.value) is cst.Call and (callee_name(node.value) or "").endswith(("Arguments", "Config")):
        state.removed_fields[target] = dropped
    value = node.value
    if type(value) is cst.Attribute and value.attr.value == "trn_config":
        _state(ctx).cli_config.add(target)
    elif type(value) is cst.Call and _qualified_name(value.func, ctx) in (
        "TrainingNeuronConfig",
        "ModelParallelismPlugin",
    ):
        _state(ctx).distributed.add(target)
    return node


@on("Attribute", "NM914")
def cli_parallel_attribute(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression:
    """`training_args.tensor_parallel_size` no longer exists once the arguments are native."""
    if type(node) is cst.Attribute and node.attr.value == "tensor_parallel_size" and _cli_arguments(ctx):
        todo(ctx, "NM914")
    return node


def _cli_arguments(ctx: FileContext) -> bool:
    """True when Optimum's training arguments are parsed from the command line (HfArgumentParser)."""
    return bool(_CLI_PARSED.search(ctx.text) and _NEURON_ARGS.search(ctx.text))


@removable
def cli_trn_config(stmt: cst.BaseStatement, ctx: FileContext) -> Removal | None:
    """`trn_config = training_args.trn_config` goes once nothing reads `trn_config`."""
    bound = assignment(stmt)
    if bound is not None and type(bound[1]) is cst.Attribute and bound[1].attr.value == "trn_config":
        return Removal("NM505", binds=bound[0])
    return None
