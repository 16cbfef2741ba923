"""The TODOs for what Optimum Neuron and torch_xla scripts keep that native TorchNeuron does
differently (pipeline and sequence parallelism, ZeRO-1, exported models, XLA bf16 switches, checkpoint
consolidation): each needs a person's decision, which the message states.
"""

from __future__ import annotations

from migrate.registry import Rule

# What replaces Optimum's tensor-parallel degree {n}: NM914 in the script and NM816 on its launch line say the same.
TP_ADVICE = (
    "pass distributed_config=DistributedConfig(tp_size={n}, fsdp_size=WORLD_SIZE // {n}) to from_pretrained "
    "and add --save_only_model"
)


RULES: tuple[Rule, ...] = (
    Rule(
        id="NM910",
        name="pipeline-parallel",
        summary="TODO: pipeline parallelism.",
        rationale="Optimum's `pipeline_parallel_size` split the layers over NeuronCores with NxD. transformers' "
        "`DistributedConfig(pp_size=)` exists but the Trainer never uses it and FSDP with PP raises, so there "
        "is no native training path.",
        message="pipeline parallelism has no native training path; shard the model with DistributedConfig(tp_size=..., fsdp_size=...) instead",
        before='from optimum.neuron import NeuronTrainingArguments\nargs = NeuronTrainingArguments(output_dir="out", pipeline_parallel_size=4)\n',
        after='from optimum.neuron import NeuronTrainingArguments\n{t}args = NeuronTrainingArguments(output_dir="out", pipeline_parallel_size=4)\n',
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM911",
        name="sequence-parallel",
        summary="TODO: sequence-parallel flags.",
        rationale="Optimum enabled sequence parallelism with tensor parallelism by default "
        "(`disable_sequence_parallel`, `sequence_parallel_enabled`). "
        "`DistributedConfig.enable_sequence_parallel` is reserved and not wired up in transformers 5.23, so "
        "activations are no longer sharded along the sequence.",
        message="sequence parallelism is not wired up natively (DistributedConfig.enable_sequence_parallel is reserved); activations now take more memory per core",
        before="from optimum.neuron.models.training import TrainingNeuronConfig\ntrn_config = TrainingNeuronConfig(tensor_parallel_size=8, sequence_parallel_enabled=True)\n",
        after="from optimum.neuron.models.training import TrainingNeuronConfig\n{t}trn_config = TrainingNeuronConfig(tensor_parallel_size=8, sequence_parallel_enabled=True)\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM912",
        name="zero1-master-weights",
        summary="TODO: ZeRO-1 with fp32 master weights.",
        rationale="Optimum's ZeRO-1 optimizer (`zero_1`, on by default in 0.4.x) kept fp32 master weights and fp32 "
        "gradient accumulation for bf16 models, with stochastic rounding. No native flag does this: fp32 "
        "weights with `bf16=True` (autocast) is closest numerically, bf16 weights closest in memory; "
        "`fsdp_size` shards optimizer state.",
        message="ZeRO-1 fp32 master weights have no native flag: keep fp32 weights with bf16=True (autocast), or accept pure-bf16 updates; fsdp_size shards the optimizer state",
        before="from optimum.neuron import NeuronAccelerator\naccelerator = NeuronAccelerator(zero_1=True)\n",
        after="from optimum.neuron import NeuronAccelerator\n{t}accelerator = NeuronAccelerator(zero_1=True)\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM913",
        name="inf2-trn1",
        summary="TODO: Inf2/Trn1-only scripts.",
        rationale="TorchNeuron supports Trn2 and Trn3 only; AWS keeps PyTorch/XLA for Inf2/Trn1 inference. A script "
        'compiled for `instance_type="inf2"` or `"trn1"` has no native target there.',
        message="TorchNeuron runs on Trn2/Trn3 only; this targets an Inf2/Trn1 instance: run it on trn2, or keep it on the XLA-based Neuron SDK",
        before='from optimum.neuron import NeuronModelForCausalLM\ncfg = NeuronModelForCausalLM.get_neuron_config("gpt2", instance_type="inf2")\n',
        after='from optimum.neuron import NeuronModelForCausalLM\n{t}cfg = NeuronModelForCausalLM.get_neuron_config("gpt2", instance_type="inf2")\n',
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM914",
        name="cli-tensor-parallel",
        summary="TODO: tensor parallelism chosen on the command line.",
        rationale="`training_args.trn_config` and `training_args.tensor_parallel_size` came from "
        "`--tensor_parallel_size`, which transformers' `TrainingArguments` rejects. The degree has to be "
        "passed to `from_pretrained` as a `DistributedConfig`, and the Trainer then needs "
        "`--save_only_model`.",
        message="tensor parallelism came from --tensor_parallel_size, which TrainingArguments rejects: "
        + TP_ADVICE.format(n="N"),
        before="from optimum.neuron.models.training import NeuronModelForCausalLM\nmodel = NeuronModelForCausalLM.from_pretrained(model_id, training_args.trn_config)\n",
        after="from optimum.neuron.models.training import NeuronModelForCausalLM\n{t}model = NeuronModelForCausalLM.from_pretrained(model_id, training_args.trn_config)\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM915",
        name="neuron-compiled-model",
        summary="TODO: loading an Optimum-exported model.",
        rationale="Without `export=True` (and always in 0.4.x `from_pretrained`) Optimum loads a compiled Neuron model "
        "directory or Hub repo (NEFF files, NxD shards) that transformers cannot read. TorchNeuron compiles "
        "at run time from the original checkpoint; the exported directory's `neuron_config.json` names it "
        "(`checkpoint_id`).",
        message="this loads an Optimum-exported (compiled) Neuron model, which transformers cannot read: point it at the original checkpoint",
        before='from optimum.neuron import NeuronModelForCausalLM\nmodel = NeuronModelForCausalLM.from_pretrained("llama-neuron-exported")\n',
        after='from optimum.neuron import NeuronModelForCausalLM\n{t}model = NeuronModelForCausalLM.from_pretrained("llama-neuron-exported")\n',
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM916",
        name="xla-gradient-sync",
        summary="TODO: `xm.optimizer_step` without DDP/FSDP.",
        rationale="`xm.optimizer_step` all-reduced the gradients across data-parallel replicas before stepping. "
        "`optimizer.step()` does not: with no DistributedDataParallel or FSDP wrapper the replicas silently "
        "train apart.",
        message="xm.optimizer_step all-reduced gradients across replicas and optimizer.step() does not: wrap the model in DistributedDataParallel (or fully_shard)",
        before="import torch_xla.core.xla_model as xm\nimport torch_xla.distributed.xla_multiprocessing as xmp\nxm.optimizer_step(optimizer)\n",
        after="import torch_xla.core.xla_model as xm\nimport torch_xla.distributed.xla_multiprocessing as xmp\n{t}xm.optimizer_step(optimizer)\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM917",
        name="torchrun-launch",
        summary="TODO: one process per NeuronCore.",
        rationale="`xmp.spawn` started one process per core and Optimum inference split a model over `num_cores` in one "
        "process. Natively each NeuronCore is one process started by `torchrun`; the script cannot start them "
        "itself.",
        message="one process per NeuronCore now: launch with torchrun --nproc_per_node <cores>",
        before="import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(_mp_fn, args=(flags,), nprocs=8)\n",
        after="import torch_xla.distributed.xla_multiprocessing as xmp\n{t}xmp.spawn(_mp_fn, args=(flags,), nprocs=8)\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM918",
        name="torch-xla-api",
        summary="TODO: torch_xla APIs with no native rewrite.",
        rationale="SPMD sharding (`xs.mark_sharding`, `Mesh`), XLA FSDP, `mesh_reduce`, debug metrics and other XLA "
        "internals have no one-to-one native call: DTensor, `torch.distributed.fsdp.fully_shard` and "
        "`torch.distributed` collectives are the replacements. The torch_xla import stays while they are "
        "used.",
        message="torch_xla is not available with TorchNeuron: port this by hand (SPMD -> DTensor, XLA FSDP -> fully_shard, collectives -> torch.distributed)",
        before="import torch_xla.distributed.spmd as xs\nxs.mark_sharding(t, mesh, (0, 1))\n",
        after="{t}import torch_xla.distributed.spmd as xs\n{t}xs.mark_sharding(t, mesh, (0, 1))\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM919",
        name="optimum-api",
        summary="TODO: Optimum Neuron APIs with no native rewrite.",
        rationale="Optimum Neuron cannot be installed next to transformers 5 and imports torch_xla, so a name that is "
        "still used (sentence-transformers wrappers, traced models, checkpoint consolidation, NxD internals) "
        "has to be ported by hand.",
        message="optimum-neuron cannot be installed with transformers 5: port this by hand",
        before='from optimum.neuron import NeuronTracedModel\nmodel = NeuronTracedModel.from_pretrained("encoder-neuron")\n',
        after='{t}from optimum.neuron import NeuronTracedModel\n{t}model = NeuronTracedModel.from_pretrained("encoder-neuron")\n',
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM920",
        name="xla-bf16-env",
        summary="TODO: `XLA_USE_BF16` / `XLA_DOWNCAST_BF16`.",
        rationale="These made torch_xla store every float tensor in bf16 on the device. Natively nothing is cast "
        "implicitly; the setting is removed and the precision must be chosen explicitly.",
        message='XLA_USE_BF16 made every float tensor bf16 and is gone: load or cast the model with dtype=torch.bfloat16, or wrap the forward in torch.autocast("neuron", dtype=torch.bfloat16)',
        before='import os\nos.environ["XLA_USE_BF16"] = "1"\nmodel = build()\n',
        after='import os\n{t}os.environ["XLA_USE_BF16"] = "1"\nmodel = build()\n',
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM922",
        name="optimum-consolidation",
        summary="TODO: Optimum Neuron's checkpoint consolidation calls.",
        rationale="`consolidate_model_parallel_checkpoints_to_unified_checkpoint` merged the per-rank shards "
        "Optimum's tensor parallelism wrote. transformers' `save_pretrained` gathers DTensor shards into one "
        "checkpoint itself, so new runs need no consolidation; old Optimum checkpoints need it once, in an "
        "environment that still has optimum-neuron.",
        message="not needed natively: save_pretrained gathers the tensor-parallel shards of a model loaded "
        "with DistributedConfig into one checkpoint; checkpoints written by Optimum Neuron must be "
        "consolidated once with optimum-neuron in the old environment",
        before="from optimum.neuron.models.training import "
        "consolidate_model_parallel_checkpoints_to_unified_checkpoint\n"
        'consolidate_model_parallel_checkpoints_to_unified_checkpoint("ckpt", "out")\n',
        after="from optimum.neuron.models.training import "
        "consolidate_model_parallel_checkpoints_to_unified_checkpoint\n"
        '{t}consolidate_model_parallel_checkpoints_to_unified_checkpoint("ckpt", "out")\n',
        safety="safe",
        todo=True,
    ),
)

# NM917 on an Optimum inference load that split the model over `num_cores`/`tensor_parallel_size` cores.
TP_LAUNCH = (
    "the export split this model over {cores} NeuronCores: torchrun --nproc_per_node {cores} shards it "
    "over them (tensor parallelism, one process per core); plain python loads it whole on one core"
)


def leftover_rule(module: str) -> str:
    """The TODO for a legacy name that stays: NM918 for torch_xla, NM919 for Optimum Neuron."""
    return "NM918" if module.split(".")[0] == "torch_xla" else "NM919"
