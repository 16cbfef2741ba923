"""NM910-NM920: what Optimum Neuron and torch_xla scripts do that has no native path.

The TODO texts and their rule records live here, apart from the rewriting families
(`optimum_training`, `optimum_inference`, `xla`) that emit them, so that each family can
leave a TODO without depending on another family's hooks. A TODO is emitted whether or not
the rewrite next to it is enabled: `--select NM912` alone still marks every ZeRO-1 flag.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import TypeVar

import libcst as cst

from migrate.context import FileContext
from migrate.markers import TODO_PREFIX
from migrate.registry import Rule
from migrate.rules.base import leading_lines

S = TypeVar("S", bound=cst.BaseStatement)

# What replaces Optimum's tensor-parallel degree {n}: NM914 in the script and NM816 on its launch line say the same.
TP_ADVICE = (
    "pass distributed_config=DistributedConfig(tp_size={n}, fsdp_size=WORLD_SIZE // {n}) to from_pretrained "
    "and add --save_only_model"
)

# id -> (name, title, why, the comment's message, example before, example after's code)
_TODOS: dict[str, tuple[str, str, str, str, str]] = {
    "NM910": (
        "pipeline-parallel",
        "pipeline parallelism",
        "Optimum's `pipeline_parallel_size` split the layers over NeuronCores with NxD. "
        "transformers' `DistributedConfig(pp_size=)` exists but the Trainer never uses it "
        "and FSDP with PP raises, so there is no native training path.",
        "pipeline parallelism has no native training path; shard the model with DistributedConfig(tp_size=..., fsdp_size=...) instead",
        'from optimum.neuron import NeuronTrainingArguments\nargs = NeuronTrainingArguments(output_dir="out", pipeline_parallel_size=4)\n',
    ),
    "NM911": (
        "sequence-parallel",
        "sequence-parallel flags",
        "Optimum enabled sequence parallelism with tensor parallelism by default "
        "(`disable_sequence_parallel`, `sequence_parallel_enabled`). "
        "`DistributedConfig.enable_sequence_parallel` is reserved and not wired up in "
        "transformers 5.23, so activations are no longer sharded along the sequence.",
        "sequence parallelism is not wired up natively (DistributedConfig.enable_sequence_parallel is reserved); activations now take more memory per core",
        "from optimum.neuron.models.training import TrainingNeuronConfig\ntrn_config = TrainingNeuronConfig(tensor_parallel_size=8, sequence_parallel_enabled=True)\n",
    ),
    "NM912": (
        "zero1-master-weights",
        "ZeRO-1 with fp32 master weights",
        "Optimum's ZeRO-1 optimizer (`zero_1`, on by default in 0.4.x) kept fp32 master "
        "weights and fp32 gradient accumulation for bf16 models, with stochastic rounding. "
        "No native flag does this: fp32 weights with `bf16=True` (autocast) is closest "
        "numerically, bf16 weights closest in memory; `fsdp_size` shards optimizer state.",
        "ZeRO-1 fp32 master weights have no native flag: keep fp32 weights with bf16=True (autocast), or accept pure-bf16 updates; fsdp_size shards the optimizer state",
        "from optimum.neuron import NeuronAccelerator\naccelerator = NeuronAccelerator(zero_1=True)\n",
    ),
    "NM913": (
        "inf2-trn1",
        "Inf2/Trn1-only scripts",
        "TorchNeuron supports Trn2 and Trn3 only; AWS keeps PyTorch/XLA for Inf2/Trn1 "
        'inference. A script compiled for `instance_type="inf2"` or `"trn1"` has no '
        "native target there.",
        "TorchNeuron runs on Trn2/Trn3 only; this targets an Inf2/Trn1 instance: run it on trn2, or keep it on the XLA-based Neuron SDK",
        'from optimum.neuron import NeuronModelForCausalLM\ncfg = NeuronModelForCausalLM.get_neuron_config("gpt2", instance_type="inf2")\n',
    ),
    "NM914": (
        "cli-tensor-parallel",
        "tensor parallelism chosen on the command line",
        "`training_args.trn_config` and `training_args.tensor_parallel_size` came from "
        "`--tensor_parallel_size`, which transformers' `TrainingArguments` rejects. The "
        "degree has to be passed to `from_pretrained` as a `DistributedConfig`, and the "
        "Trainer then needs `--save_only_model`.",
        "tensor parallelism came from --tensor_parallel_size, which TrainingArguments rejects: "
        + TP_ADVICE.format(n="N"),
        "from optimum.neuron.models.training import NeuronModelForCausalLM\nmodel = NeuronModelForCausalLM.from_pretrained(model_id, training_args.trn_config)\n",
    ),
    "NM915": (
        "neuron-compiled-model",
        "loading an Optimum-exported model",
        "Without `export=True` (and always in 0.4.x `from_pretrained`) Optimum loads a "
        "compiled Neuron model directory or Hub repo (NEFF files, NxD shards) that "
        "transformers cannot read. TorchNeuron compiles at run time from the original "
        "checkpoint; the exported directory's `neuron_config.json` names it "
        "(`checkpoint_id`).",
        "this loads an Optimum-exported (compiled) Neuron model, which transformers cannot read: point it at the original checkpoint",
        'from optimum.neuron import NeuronModelForCausalLM\nmodel = NeuronModelForCausalLM.from_pretrained("llama-neuron-exported")\n',
    ),
    "NM916": (
        "xla-gradient-sync",
        "`xm.optimizer_step` without DDP/FSDP",
        "`xm.optimizer_step` all-reduced the gradients across data-parallel replicas before "
        "stepping. `optimizer.step()` does not: with no DistributedDataParallel or FSDP "
        "wrapper the replicas silently train apart.",
        "xm.optimizer_step all-reduced gradients across replicas and optimizer.step() does not: wrap the model in DistributedDataParallel (or fully_shard)",
        "import torch_xla.core.xla_model as xm\nimport torch_xla.distributed.xla_multiprocessing as xmp\nxm.optimizer_step(optimizer)\n",
    ),
    "NM917": (
        "torchrun-launch",
        "one process per NeuronCore",
        "`xmp.spawn` started one process per core and Optimum inference split a model over "
        "`num_cores` in one process. Natively each NeuronCore is one process started by "
        "`torchrun`; the script cannot start them itself.",
        "one process per NeuronCore now: launch with torchrun --nproc_per_node <cores>",
        "import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(_mp_fn, args=(flags,), nprocs=8)\n",
    ),
    "NM918": (
        "torch-xla-api",
        "torch_xla APIs with no native rewrite",
        "SPMD sharding (`xs.mark_sharding`, `Mesh`), XLA FSDP, `mesh_reduce`, debug "
        "metrics and other XLA internals have no one-to-one native call: DTensor, "
        "`torch.distributed.fsdp.fully_shard` and `torch.distributed` collectives are "
        "the replacements. The torch_xla import stays while they are used.",
        "torch_xla is not available with TorchNeuron: port this by hand (SPMD -> DTensor, XLA FSDP -> fully_shard, collectives -> torch.distributed)",
        "import torch_xla.distributed.spmd as xs\nxs.mark_sharding(t, mesh, (0, 1))\n",
    ),
    "NM919": (
        "optimum-api",
        "Optimum Neuron APIs with no native rewrite",
        "Optimum Neuron cannot be installed next to transformers 5 and imports torch_xla, "
        "so a name that is still used (sentence-transformers wrappers, traced models, "
        "checkpoint consolidation, NxD internals) has to be ported by hand.",
        "optimum-neuron cannot be installed with transformers 5: port this by hand",
        'from optimum.neuron import NeuronTracedModel\nmodel = NeuronTracedModel.from_pretrained("encoder-neuron")\n',
    ),
    "NM920": (
        "xla-bf16-env",
        "`XLA_USE_BF16` / `XLA_DOWNCAST_BF16`",
        "These made torch_xla store every float tensor in bf16 on the device. Natively "
        "nothing is cast implicitly; the setting is removed and the precision must be "
        "chosen explicitly.",
        'XLA_USE_BF16 made every float tensor bf16 and is gone: load or cast the model with dtype=torch.bfloat16, or wrap the forward in torch.autocast("neuron", dtype=torch.bfloat16)',
        'import os\nos.environ["XLA_USE_BF16"] = "1"\nmodel = build()\n',
    ),
}

_AFTER = {
    "NM910": 'from optimum.neuron import NeuronTrainingArguments\n{t}args = NeuronTrainingArguments(output_dir="out", pipeline_parallel_size=4)\n',
    "NM911": "from optimum.neuron.models.training import TrainingNeuronConfig\n{t}trn_config = TrainingNeuronConfig(tensor_parallel_size=8, sequence_parallel_enabled=True)\n",
    "NM912": "from optimum.neuron import NeuronAccelerator\n{t}accelerator = NeuronAccelerator(zero_1=True)\n",
    "NM913": 'from optimum.neuron import NeuronModelForCausalLM\n{t}cfg = NeuronModelForCausalLM.get_neuron_config("gpt2", instance_type="inf2")\n',
    "NM914": "from optimum.neuron.models.training import NeuronModelForCausalLM\n{t}model = NeuronModelForCausalLM.from_pretrained(model_id, training_args.trn_config)\n",
    "NM915": 'from optimum.neuron import NeuronModelForCausalLM\n{t}model = NeuronModelForCausalLM.from_pretrained("llama-neuron-exported")\n',
    "NM916": "import torch_xla.core.xla_model as xm\nimport torch_xla.distributed.xla_multiprocessing as xmp\n{t}xm.optimizer_step(optimizer)\n",
    "NM917": "import torch_xla.distributed.xla_multiprocessing as xmp\n{t}xmp.spawn(_mp_fn, args=(flags,), nprocs=8)\n",
    "NM918": "{t}import torch_xla.distributed.spmd as xs\n{t}xs.mark_sharding(t, mesh, (0, 1))\n",
    "NM919": '{t}from optimum.neuron import NeuronTracedModel\n{t}model = NeuronTracedModel.from_pretrained("encoder-neuron")\n',
    "NM920": 'import os\n{t}os.environ["XLA_USE_BF16"] = "1"\nmodel = build()\n',
}

MESSAGES = {rule_id: entry[3] for rule_id, entry in _TODOS.items()}

RULES: tuple[Rule, ...] = tuple(
    Rule(
        id=_id,
        name=_name,
        summary=f"TODO: {_title}.",
        rationale=_why,
        before=_before,
        after=_AFTER[_id].replace("{t}", f"# TODO(neuron-migrate {_id}): {_message}\n"),
        safety="safe",
        todo=True,
    )
    for _id, (_name, _title, _why, _message, _before) in _TODOS.items()
)


def todo(ctx: FileContext, rule_id: str, message: str | None = None) -> None:
    """Leave the TODO `rule_id` on the current statement (its own text unless `message` is given)."""
    if ctx.enabled(rule_id):
        ctx.todo(rule_id, message or MESSAGES[rule_id])


def leftover_rule(module: str) -> str:
    """The TODO for a legacy name that stays: NM918 for torch_xla, NM919 for Optimum Neuron."""
    return "NM918" if module.split(".")[0] == "torch_xla" else "NM919"


def attach(stmt: S, ctx: FileContext, rule_id: str, header: Set[str] = frozenset(), message: str | None = None) -> S:
    """Put the TODO `rule_id` above `stmt` directly, once (also not when `header` has it).

    For statements that replace the one a hook ran for (an unwrapped `with`, a rewritten
    import), whose statement frame no longer owns them.
    """

    tag = f"{TODO_PREFIX}{rule_id}"
    present = {line.comment.value.split(")")[0] for line in leading_lines(stmt) if line.comment is not None}
    if tag in present | set(header) or not ctx.enabled(rule_id):
        return stmt
    comment = cst.EmptyLine(comment=cst.Comment(f"{tag}): {message or MESSAGES[rule_id]}"))
    return stmt.with_changes(leading_lines=[*leading_lines(stmt), comment])


def flatten(ctx: FileContext, statements: Sequence[cst.BaseStatement]) -> cst.FlattenSentinel[cst.BaseStatement]:
    """Several statements in place of the current one, its TODOs on the first of them.

    The engine hands the TODOs of a statement that became several to the enclosing statement
    (a `def` line, say); they belong above the code they are about.
    """
    frame = ctx.frames[-1]
    first = statements[0]
    for rule_id, message in frame.todos:
        first = attach(first, ctx, rule_id, message=message)
    frame.todos = []
    return cst.FlattenSentinel([first, *statements[1:]])
