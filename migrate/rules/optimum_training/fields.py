"""NM503: the training-arguments fields only Optimum had (ZeRO-1, sequence and pipeline parallelism,
NxD settings) are dropped from the constructors and their reads, each with the TODO that says what capability
went; `DROPPED` and `ARGUMENT_FIELDS` are also read by the launch-line rules (`migrate.configs.shell_rules`).
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    code,
    has_star_kwargs,
    kwarg,
    on,
    remove_arg,
    string_value,
    wrap_long,
)
from migrate.rules.optimum_training.parallel import _TP_CONFIG
from migrate.rules.optimum_training.state import _is_one, _state
from migrate.rules.todo_catalogue import todo

RULES: tuple[Rule, ...] = (
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
)

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
