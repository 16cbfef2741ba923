"""NM501-NM508 Optimum Neuron training -> transformers / TRL / accelerate on TorchNeuron.

docs/gaps.md (Optimum Neuron facts) and docs/rules.md (NM5xx), across the three API generations (<=0.0.x,
0.1-0.3, 0.4.x). optimum-neuron pins transformers 4.57 and imports torch_xla at import time,
so it cannot be installed next to the native stack: every name is swapped for its native
class (the import rewrite is `legacy_imports.py`'s), and what only Optimum understood (NxD
parallelism fields, ZeRO-1 flags, the custom training models' `trn_config` argument) is
dropped, moved to a `DistributedConfig`, or marked with an NM91x TODO.
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
    assignment,
    call_statement,
    callee_name,
    code,
    family_state,
    has_star_kwargs,
    kwarg,
    leading_lines,
    method_of,
    on,
    positional_args,
    remove_arg,
    replace_arg,
    statements_of,
    string_value,
    wrap_long,
)
from migrate.rules.legacy_names import resolve, swap
from migrate.rules.removal import Removal, removable
from migrate.rules.todo_catalogue import flatten, todo

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM501",
        name="optimum-trainer",
        safety="unsafe",
        safety_reason="transformers' own classes replace Optimum's, whose Neuron-specific steps and defaults no "
        "longer apply",
        summary="`NeuronTrainer`, `NeuronTrainingArguments`, `Seq2Seq*`, `NeuronHfArgumentParser` -> transformers.",
        rationale="Up to 0.3 these were thin subclasses of the transformers classes; from 0.4 they "
        "are standalone copies. transformers 5 runs on Neuron itself (`TrainingArguments` picks "
        "`neuron:0`, accelerate uses the `neuron` backend), so the native classes replace them, "
        "aliases included (`NeuronTrainer as Trainer`). Unused `optimum.neuron` imports go. "
        "Defaults that differ and are kept: `optim` (Optimum `adamw_torch`, native "
        "`adamw_torch_fused`) and `report_to`.",
        before="from optimum.neuron import NeuronTrainer, NeuronTrainingArguments\n"
        'args = NeuronTrainingArguments(output_dir="out")\ntrainer = NeuronTrainer(model=model, args=args)\n',
        after="from transformers import Trainer, TrainingArguments\n"
        'args = TrainingArguments(output_dir="out")\ntrainer = Trainer(model=model, args=args)\n',
    ),
    Rule(
        id="NM502",
        name="optimum-sft",
        safety="safe",
        summary="`NeuronSFTTrainer`/`NeuronSFTConfig` -> `trl.SFTTrainer`/`SFTConfig`, Optimum's defaults written out.",
        rationale="`NeuronSFTConfig` took four defaults from `NeuronTrainingArguments` that TRL 1.x "
        "sets differently (`learning_rate` 5e-5 vs 2e-5, `logging_steps` 500 vs 10, "
        "`gradient_checkpointing` False vs True, `bf16` False vs auto), so a bare rename would "
        "silently change training; the ones a call does not set are added. A call that spreads "
        "`**training_args.to_dict()` already carries them. `NeuronORPOTrainer`/`NeuronORPOConfig` "
        "-> `trl.experimental.orpo`.",
        before='from optimum.neuron import NeuronSFTConfig\nargs = NeuronSFTConfig(output_dir="out")\n',
        after='from trl import SFTConfig\nargs = SFTConfig(\n    output_dir="out",\n    learning_rate=5e-5,\n'
        "    logging_steps=500,\n    gradient_checkpointing=False,\n    bf16=False,\n)\n",
    ),
    Rule(
        id="NM503",
        name="neuron-training-fields",
        safety="unsafe",
        safety_reason="the dropped Neuron-only features (ZeRO-1, async save, fused QKV, ...) no longer take effect",
        summary="Drop Neuron-only fields from training arguments (`zero_1`, `async_save`, `fuse_qkv`, ...).",
        rationale="`TrainingArguments` rejects them (TypeError). Each dropped field is listed in the "
        "report with what replaces it; pipeline parallelism, sequence parallelism and ZeRO-1 master "
        "weights also get a TODO (NM910-NM912). `tensor_parallel_size` moves (NM505).",
        before="from optimum.neuron import NeuronTrainingArguments\n"
        'args = NeuronTrainingArguments(output_dir="out", async_save=True, skip_cache_push=True)\n',
        after='from optimum.neuron import NeuronTrainingArguments\nargs = NeuronTrainingArguments(output_dir="out")\n',
    ),
    Rule(
        id="NM504",
        name="neuron-accelerator",
        safety="unsafe",
        safety_reason="ZeRO-1 and Optimum's mixed-precision settings are dropped; precision becomes accelerate's bf16",
        summary='`NeuronAccelerator(...)` -> `Accelerator(mixed_precision="bf16")`; NxD arguments dropped.',
        rationale="accelerate 1.15 detects Neuron (`MULTI_NEURON`, backend `neuron`, bf16 autocast "
        'on `device_type="neuron"`). `trn_config` moves to the model\'s `from_pretrained` (NM505), '
        "`zero_1` and `mixed_precision_config` have no accelerate equivalent (ZeRO-1: NM912). "
        "`NeuronPartialState`/`NeuronAcceleratorState` -> accelerate's.",
        before="from optimum.neuron import NeuronAccelerator\naccelerator = NeuronAccelerator(gradient_accumulation_steps=4)\n",
        after='from accelerate import Accelerator\naccelerator = Accelerator(gradient_accumulation_steps=4, mixed_precision="bf16")\n',
    ),
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
    Rule(
        id="NM507",
        name="lazy-load",
        safety="safe",
        summary="`with lazy_load_for_parallelism(...):` blocks are unwrapped.",
        rationale="Up to 0.2 the context manager created Linear/Embedding layers on the meta device "
        "so NxD could shard them later. Native sharded loading is `from_pretrained(..., "
        "distributed_config=...)`; the body runs as it is. A tensor-parallel degree taken from the "
        "command line gets TODO NM914.",
        before="from optimum.neuron.distributed import lazy_load_for_parallelism\n"
        "with lazy_load_for_parallelism(tensor_parallel_size=1):\n    model = AutoModelForCausalLM.from_pretrained(name)\n",
        after="model = AutoModelForCausalLM.from_pretrained(name)\n",
    ),
    Rule(
        id="NM508",
        name="optimum-utils",
        safety="safe",
        summary="Optimum helpers: PEFT wrappers -> peft, `is_main_worker()` -> `PartialState().is_main_process`, SDK patching dropped.",
        rationale="`get_peft_model`/`NeuronPeftModel` wrapped peft for NxD layers, which native "
        "models do not have. `patch_transformers_for_neuron_sdk()` and `MixedPrecisionConfig` "
        "configured the XLA stack and are removed; `is_precompilation()` is always False "
        "(there is no `neuron_parallel_compile` phase).",
        before="from optimum.neuron.utils import is_main_worker, patch_transformers_for_neuron_sdk\n"
        'patch_transformers_for_neuron_sdk()\nif is_main_worker():\n    print("ready")\n',
        after='from accelerate import PartialState\nif PartialState().is_main_process:\n    print("ready")\n',
    ),
)

_ON = ("optimum.neuron",)
_TRAINING = ("optimum.neuron.models.training",)
for _old, _module, _new in (
    ("NeuronTrainer", "transformers", "Trainer"),
    ("NeuronTrainingArguments", "transformers", "TrainingArguments"),
    ("Seq2SeqNeuronTrainer", "transformers", "Seq2SeqTrainer"),
    ("Seq2SeqNeuronTrainingArguments", "transformers", "Seq2SeqTrainingArguments"),
    ("NeuronHfArgumentParser", "transformers", "HfArgumentParser"),
):
    swap(_ON, _old, _module, _new, "NM501")
for _old, _module, _new in (
    ("NeuronSFTTrainer", "trl", "SFTTrainer"),
    ("NeuronSFTConfig", "trl", "SFTConfig"),
    ("NeuronORPOTrainer", "trl.experimental.orpo", "ORPOTrainer"),
    ("NeuronORPOConfig", "trl.experimental.orpo", "ORPOConfig"),
):
    swap(_ON, _old, _module, _new, "NM502")
swap(_ON, "NeuronAccelerator", "accelerate", "Accelerator", "NM504")
swap(_ON, "NeuronPartialState", "accelerate", "PartialState", "NM504")
swap(_ON, "NeuronAcceleratorState", "accelerate.state", "AcceleratorState", "NM504")
swap(_ON, "TrainingNeuronConfig", "transformers.distributed", "DistributedConfig", "NM505")
swap(_ON, "ModelParallelismPlugin", "transformers.distributed", "DistributedConfig", "NM505")
swap(_TRAINING, "NeuronModelForCausalLM", "transformers", "AutoModelForCausalLM", "NM506")
swap(_TRAINING, "NeuronModel", "transformers", "AutoModel", "NM506")
for _arch in ("LlamaForCausalLM", "Qwen3ForCausalLM", "GraniteForCausalLM"):
    swap(_TRAINING, _arch, "transformers", _arch, "NM506")
swap(_ON, "lazy_load_for_parallelism", None, None, "NM507")
swap(_ON, "get_peft_model", "peft", "get_peft_model", "NM508")
swap(_ON, "NeuronPeftModel", "peft", "PeftModel", "NM508")
swap(_ON, "NeuronPeftModelForCausalLM", "peft", "PeftModelForCausalLM", "NM508")
for _helper in (
    "is_main_worker",
    "is_logging_process",
    "is_main_worker_for_metrics",
    "is_precompilation",
    "patch_transformers_for_neuron_sdk",
    "MixedPrecisionConfig",
):
    swap(_ON, _helper, None, None, "NM508")

_ARGS = {"NeuronTrainingArguments", "Seq2SeqNeuronTrainingArguments", "NeuronSFTConfig", "NeuronORPOConfig"}
_SFT_DEFAULTS = (
    ("learning_rate", "5e-5"),
    ("logging_steps", "500"),
    ("gradient_checkpointing", "False"),
    ("bf16", "False"),
)
_ZERO1 = (
    "zero_1",
    "stochastic_rounding_enabled",
    "optimizer_use_master_weights",
    "optimizer_use_fp32_grad_acc",
    "optimizer_save_master_weights_in_ckpt",
)
_SEQUENCE_PARALLEL = ("disable_sequence_parallel", "sequence_parallel_enabled")
_PIPELINE = ("pipeline_parallel_size",)
# Neuron-only fields -> what the report says about dropping them.
DROPPED = {
    **dict.fromkeys(_ZERO1, "ZeRO-1 master weights have no native flag (NM912)"),
    **dict.fromkeys(_SEQUENCE_PARALLEL, "sequence parallelism is not wired up natively (NM911)"),
    **dict.fromkeys(_PIPELINE, "pipeline parallelism has no native training path (NM910)"),
    "pipeline_parallel_num_microbatches": "pipeline parallelism has no native training path (NM910)",
    "virtual_pipeline_parallel_size": "pipeline parallelism has no native training path (NM910)",
    "pipeline_parallel_use_zero1_optimizer": "pipeline parallelism has no native training path (NM910)",
    "kv_size_multiplier": "transformers' TP does not replicate KV heads; keep tp_size a divisor of num_key_value_heads",
    "fuse_qkv": "fused QKV belonged to Optimum's custom models",
    "recompute_causal_mask": "a custom-model memory trick",
    "transpose_nki_inputs": "an NKI kernel layout option",
    "use_autocast": "native bf16=True is autocast",
    "num_local_ranks_per_step": "NxD checkpoint IO; save_pretrained gathers shards itself",
    "use_xser": "NxD checkpoint IO; save_pretrained gathers shards itself",
    "async_save": "NxD checkpoint IO; save_pretrained gathers shards itself",
    "checkpoint_dir": "NxD checkpoint IO; resume with Trainer(resume_from_checkpoint=)",
    "skip_cache_push": "the Optimum Hub compile cache does not exist natively",
    "dataloader_prefetch_size": "XLA device-side prefetch; dataloader_prefetch_factor is unrelated",
    "enable_throughput_metrics": "Optimum's metrics collector",
    "enable_mfu_metrics": "Optimum's metrics collector",
    "enable_efficiency_metrics": "Optimum's metrics collector",
    "metrics_window_size": "Optimum's metrics collector",
    "half_precision_backend": "bf16=True is autocast natively",
    "neuron_cc_optlevel": "a neuronx-cc flag of the XLA stack",
    "disable_embedding_parallelization": "transformers' TP plan decides what is sharded",
    "gradient_checkpointing": "set gradient_checkpointing=True in the training arguments instead",
    "parallelize_embeddings": "transformers' TP plan decides what is sharded",
    "mp_plugin": "the parallelism now lives in from_pretrained(distributed_config=...)",
    "autocast_backend": 'accelerate autocasts with mixed_precision="bf16"',
    "trn_config": "the parallelism now lives in from_pretrained(distributed_config=...)",
    "mixed_precision_config": 'mixed_precision="bf16" is set instead',
}
# The fields NeuronTrainingArguments declared in some release (the others above are
# TrainingNeuronConfig / NeuronAccelerator keywords): what HfArgumentParser took as `--name` on a
# launch line, where NM816 removes them. True marks a bool, whose flag stands alone or takes
# true/false; the others take a value.
ARGUMENT_FIELDS: dict[str, bool] = {
    "tensor_parallel_size": False,
    "pipeline_parallel_size": False,
    "pipeline_parallel_num_microbatches": False,
    "kv_size_multiplier": False,
    "num_local_ranks_per_step": False,
    "dataloader_prefetch_size": False,
    "metrics_window_size": False,
    "half_precision_backend": False,
    "neuron_cc_optlevel": False,
    "zero_1": True,
    "stochastic_rounding_enabled": True,
    "optimizer_use_master_weights": True,
    "optimizer_use_fp32_grad_acc": True,
    "optimizer_save_master_weights_in_ckpt": True,
    "disable_sequence_parallel": True,
    "sequence_parallel_enabled": True,
    "disable_embedding_parallelization": True,
    "fuse_qkv": True,
    "recompute_causal_mask": True,
    "use_autocast": True,
    "use_xser": True,
    "async_save": True,
    "skip_cache_push": True,
    "enable_throughput_metrics": True,
    "enable_mfu_metrics": True,
    "enable_efficiency_metrics": True,
}


def lost_capability(name: str, value: str | None) -> str | None:
    """The NM91x TODO that dropping the field `name` set to `value` needs, if any.

    `value` is the setting as Python source (`True`, `False`, `4`), None when it is not known
    (a launch line's `$PP_DEGREE`): unknown counts as on. Shared with the launch-line rule
    (NM816), so a flag and a keyword lose the same things.
    """
    if name in _ZERO1:
        return None if value == "False" else "NM912"
    if name in _SEQUENCE_PARALLEL:
        return None if value == ("True" if name == "disable_sequence_parallel" else "False") else "NM911"
    if name in _PIPELINE:
        return None if value == "1" else "NM910"
    return None


_TP_CONFIG = re.compile(r"\b(?:TrainingNeuronConfig|ModelParallelismPlugin)\(")
_TP_LITERAL = re.compile(r"\btensor_parallel_size\s*=\s*(\d+)")
_CLI_PARSED = re.compile(r"HfArgumentParser\(")
_NEURON_ARGS = re.compile(r"\b(?:Seq2Seq)?Neuron(?:TrainingArguments|SFTConfig)\b")


@dataclass
class _State:
    tp: cst.BaseExpression | None = None  # tensor_parallel_size of the last training-arguments call
    distributed: set[str] = field(default_factory=set)  # names bound to a DistributedConfig(...)
    cli_config: set[str] = field(default_factory=set)  # names bound to `<args>.trn_config`
    # the `False` nodes that replaced is_precompilation(), by id (held, so no other node reuses the id)
    precompilation: dict[int, cst.Name] = field(default_factory=dict)
    # fields dropped from the training-arguments call of the current statement, and, once it is
    # bound (`training_args = NeuronTrainingArguments(...)`), per name: field -> the value it had
    dropped: dict[str, cst.BaseExpression] = field(default_factory=dict)
    removed_fields: dict[str, dict[str, cst.BaseExpression]] = field(default_factory=dict)


def _state(ctx: FileContext) -> _State:
    return family_state(ctx, "optimum-training", _State)


def _is_one(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Integer and node.value == "1"


def _qualified_name(node: cst.BaseExpression, ctx: FileContext) -> str:
    """`NeuronTrainer` when `node` resolves to an Optimum name with a swap; else ''."""
    qualified = ctx.qualify(node)
    return qualified.rpartition(".")[2] if qualified is not None and resolve(qualified) is not None else ""


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


def _drop_fields(node: cst.Call, ctx: FileContext, rule_id: str, owner: str) -> cst.Call:
    """Remove Neuron-only keywords, warn for each, and leave the TODOs their loss needs."""
    for arg in list(node.args):
        name = arg.keyword.value if arg.keyword is not None else None
        if name not in DROPPED or (name == "gradient_checkpointing" and owner in _ARGS):
            continue
        value = arg.value
        lost = lost_capability(name, code(value))
        if lost is not None:
            todo(ctx, lost)
        if not ctx.enabled(rule_id):
            continue
        current = kwarg(node, name)
        assert current is not None
        node = remove_arg(node, current)
        _state(ctx).dropped[name] = value
        ctx.hit(rule_id)
        ctx.warn(rule_id, f"{owner}: dropped {name}={code(value)}: {DROPPED[name]}")
    return node


def _training_args(node: cst.Call, ctx: FileContext, name: str) -> cst.Call:
    state = _state(ctx)
    tp = kwarg(node, "tensor_parallel_size")
    if tp is not None and ctx.enabled("NM505"):
        state.tp = tp.value
        state.dropped["tensor_parallel_size"] = tp.value
        node = remove_arg(node, tp)
        ctx.hit("NM505")
        if not _is_one(tp.value):
            node = _save_only_model(node)
    elif _TP_CONFIG.search(ctx.text) and ctx.enabled("NM505"):
        node = _save_only_model(node)
    node = _drop_fields(node, ctx, "NM503", name)
    if name == "NeuronSFTConfig" and ctx.enabled("NM502") and not has_star_kwargs(node):
        for key, value in _SFT_DEFAULTS:
            if kwarg(node, key) is None:
                node = add_kwarg(node, key, value)
                ctx.hit("NM502")
    return wrap_long(node)


def _save_only_model(node: cst.Call) -> cst.Call:
    """A Trainer on a sharded model raises unless only the model is saved (or nothing is)."""
    strategy = kwarg(node, "save_strategy")
    if kwarg(node, "save_only_model") is not None or has_star_kwargs(node):
        return node
    if strategy is not None and string_value(strategy.value) == "no":
        return node
    return add_kwarg(node, "save_only_model", "True")


def _accelerator(node: cst.Call, ctx: FileContext) -> cst.Call:
    node = _drop_fields(node, ctx, "NM504", "NeuronAccelerator")
    if ctx.enabled("NM504") and kwarg(node, "mixed_precision") is None and not has_star_kwargs(node):
        node = add_kwarg(node, "mixed_precision", '"bf16"')
        ctx.hit("NM504")
    return wrap_long(node)


def _parallel_config(node: cst.Call, ctx: FileContext, name: str) -> cst.Call:
    node = _drop_fields(node, ctx, "NM505", name)
    if not ctx.enabled("NM505"):
        return node
    tp = kwarg(node, "tensor_parallel_size")
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value != "tensor_parallel_size":
            ctx.warn("NM505", f"{name}: dropped {arg.keyword.value}={code(arg.value)}: no DistributedConfig field")
    ctx.hit("NM505")
    return wrap_long(_distributed_config(ctx, tp.value if tp is not None else None, node.func))


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


@on("Call", "NM502", "NM503", "NM504", "NM505", "NM506", "NM508", "NM910", "NM911", "NM912", "NM914")
def optimum_training_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    name = _qualified_name(node.func, ctx)
    if name in _ARGS:
        return _training_args(node, ctx, name)
    if name == "NeuronAccelerator":
        return _accelerator(node, ctx)
    if name in ("TrainingNeuronConfig", "ModelParallelismPlugin"):
        return _parallel_config(node, ctx, name)
    if name in ("is_main_worker", "is_logging_process", "is_main_worker_for_metrics") and ctx.enabled("NM508"):
        ctx.hit("NM508")
        return cst.parse_expression(f"{ctx.name_ref('accelerate', 'PartialState')}().is_main_process")
    if name == "is_precompilation" and ctx.enabled("NM508"):
        ctx.hit("NM508")
        constant = cst.Name("False")
        _state(ctx).precompilation[id(constant)] = constant
        return constant
    if method_of(node, "from_pretrained") and type(node.func) is cst.Attribute:
        found = resolve(ctx.qualify(node.func.value))
        if found is not None and found.rule_id == "NM506":
            return _training_model(node, ctx)
    return node


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


@on("Attribute", "NM503", "NM505")
def dropped_field_read(node: cst.Attribute, ctx: FileContext) -> cst.BaseExpression:
    """`training_args.tensor_parallel_size` after `tensor_parallel_size=8` was dropped from the
    call that built `training_args` reads the value it was given (`8`): the native arguments
    have no such field, so the read would be an AttributeError."""
    if type(node.value) is not cst.Name:
        return node
    value = _state(ctx).removed_fields.get(node.value.value, {}).get(node.attr.value)
    if value is None or type(value) not in (cst.Integer, cst.Float, cst.Name, cst.SimpleString, cst.Attribute):
        return node
    rule_id = "NM505" if node.attr.value == "tensor_parallel_size" else "NM503"
    if not ctx.enabled(rule_id):
        return node
    ctx.hit(rule_id)
    return value


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


@removable
def sdk_patching(stmt: cst.BaseStatement, ctx: FileContext) -> Removal | None:
    """`patch_transformers_for_neuron_sdk()` configured transformers for the XLA stack."""
    call = call_statement(stmt)
    if call is not None and _qualified_name(call.func, ctx) == "patch_transformers_for_neuron_sdk":
        return Removal("NM508")
    return None


@on("With", "NM505", "NM507")
def lazy_load(node: cst.With, ctx: FileContext) -> HookResult:
    """Unwrap `with lazy_load_for_parallelism(...):`; other context managers in the same `with` stay."""
    items = [
        i
        for i in node.items
        if not (type(i.item) is cst.Call and _qualified_name(i.item.func, ctx) == "lazy_load_for_parallelism")
    ]
    if len(items) == len(node.items):
        return node
    removed = next(i for i in node.items if i not in items)
    assert type(removed.item) is cst.Call
    tp = kwarg(removed.item, "tensor_parallel_size")
    parallel = tp is not None and not _is_one(tp.value)
    # A degree read from CLI-parsed training arguments is gone (TODO NM914, from the attribute
    # hook); one the script holds itself (argparse, a constant) moves to the loads in the body.
    from_cli = parallel and type(tp.value) is cst.Attribute and _cli_arguments(ctx)  # type: ignore[union-attr]
    if not ctx.enabled("NM507"):
        return node
    ctx.hit("NM507")
    if items:
        items[-1] = items[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return node.with_changes(items=items)
    body = statements_of(node.body)
    body[0] = body[0].with_changes(leading_lines=[*node.leading_lines, *leading_lines(body[0])])
    if parallel and not from_cli and ctx.enabled("NM505"):
        assert tp is not None
        loader = _LoadSharded(ctx)
        body = [stmt.visit(loader) for stmt in body]  # type: ignore[misc]
        if loader.sharded:
            config = _distributed_config(
                ctx, tp.value, cst.Name(ctx.name_ref("transformers.distributed", "DistributedConfig"))
            )
            line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(_CONFIG))], wrap_long(config))])
            body = [
                line.with_changes(leading_lines=leading_lines(body[0])),
                body[0].with_changes(leading_lines=[]),
                *body[1:],
            ]
    return flatten(ctx, body)  # the with statement's TODOs (NM914) go on its first statement


_CONFIG = "distributed_config"


class _LoadSharded(cst.CSTTransformer):
    """Pass `distributed_config=distributed_config` to the loads of an unwrapped lazy-load block."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.sharded = False

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if not method_of(updated, "from_pretrained") or kwarg(updated, "distributed_config") is not None:
            return updated
        self.ctx.hit("NM505")
        self.sharded = True
        return wrap_long(add_kwarg(updated, "distributed_config", _CONFIG))


@on("If")
def precompilation_branch(node: cst.If, ctx: FileContext) -> HookResult:
    """`if is_precompilation(): A else: B` -> `B`; `if not is_precompilation(): A` -> `A`.

    There is no `neuron_parallel_compile` phase any more, so the branch it guarded is dead.
    """
    test = node.test
    negated = type(test) is cst.UnaryOperation and type(test.operator) is cst.Not
    constant = test.expression if negated else test  # type: ignore[attr-defined]
    if id(constant) not in _state(ctx).precompilation or isinstance(node.orelse, cst.If):
        return node
    if negated:
        kept = statements_of(node.body)
    else:
        kept = statements_of(node.orelse.body) if node.orelse is not None else []
    if not kept:
        if any(line.comment is not None for line in node.leading_lines):
            return cst.SimpleStatementLine([cst.Pass()], leading_lines=node.leading_lines)
        return cst.RemoveFromParent()
    kept[0] = kept[0].with_changes(leading_lines=[*node.leading_lines, *leading_lines(kept[0])])
    return flatten(ctx, kept)
