"""The TODO catalogue: the TODO rules several families leave, each a `Rule` with its fixed `message`.

A TODO rule annotates instead of rewriting: `# TODO(neuron-migrate NM9xx): message` goes above
the statement, the code stays as it is (still valid Python), and the report lists each TODO with
file:line. A TODO is added once per statement and rule, so reruns are no-ops. The families that
detect the constructs (`todo` for CUDA-only packages and APIs, `optimum_training`,
`optimum_inference`, `xla`, `compile_env`, `tensor_parallel`, `quantization`, and the YAML/shell
migrators) all take their words from here, so each family can leave a TODO without depending on
another family's hooks. A TODO is emitted whether or not the rewrite next to it is enabled:
`--select NM912` alone still marks every ZeRO-1 flag.

Fix safety: annotating is safe, except where the TODO also replaces a call that raises without
CUDA (NM904): the replacement value decides which branch the script takes.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import TypeVar

import libcst as cst

from migrate.context import FileContext
from migrate.kernel_repos import todo_message
from migrate.markers import TODO_PREFIX
from migrate.registry import Rule
from migrate.rules.base import leading_lines

S = TypeVar("S", bound=cst.BaseStatement)

# What replaces Optimum's tensor-parallel degree {n}: NM914 in the script and NM816 on its launch line say the same.
TP_ADVICE = (
    "pass distributed_config=DistributedConfig(tp_size={n}, fsdp_size=WORLD_SIZE // {n}) to from_pretrained "
    "and add --save_only_model"
)
# NM903 on an `if torch.cuda.is_available():` block that NM104 leaves guarded by CUDA.
CUDA_ONLY_BLOCK = (
    "this block calls torch.cuda.{names} (no Neuron equivalent), so it stays behind the CUDA check "
    "and is skipped on Neuron; port it to torch.accelerator / torch.neuron to run it there"
)

# NM903 on a guarded block that reads names only a block kept behind its CUDA check (CUDA_ONLY_BLOCK) binds.
CUDA_ONLY_NAMES = (
    "this block uses {names}, set only in a block above that stays behind its CUDA check, so it stays behind "
    "the CUDA check too and is skipped on Neuron; port both to torch.accelerator / torch.neuron to run them there"
)

# NM908 on what a script still takes from bitsandbytes once NM209/NM210 rewrote the rest (its import, a
# quantized layer it builds): not the model-memory text, which is about a quantized load.
BNB_LEFT = (
    "bitsandbytes is CUDA-only and is not installed with TorchNeuron; NM209/NM210 replaced quantized loads, "
    "quantized Linear layers and 8-bit optimizers, replace what this line still uses with its torch equivalent"
)

# NM932 on a loop that passes the pipeline new values of the shape arguments {names} (`height/width`).
SHAPE_LOOP = (
    "this loop passes a new {names} to the pipeline each iteration: on Neuron every new height/width, "
    "batch x num_images_per_prompt or CFG on/off (guidance_scale crossing 1 halves the batch) compiles new "
    "denoiser and decode graphs, about a minute each; fix them, or warm up each combination you serve once"
)


# Every catalogued TODO rule: its `message` is the comment its hooks leave unless they word one for the case.
RULES: tuple[Rule, ...] = (
    Rule(
        id="NM901",
        name="vllm",
        summary="TODO: vLLM inference engine.",
        rationale="vLLM's CUDA engine does not run on TorchNeuron and its API (batched prompts, SamplingParams, "
        "RequestOutput) differs from transformers.",
        message='vLLM does not run on Neuron; use model.generate(..., cache_implementation="static") on device_map="neuron"',
        before="from vllm import LLM, SamplingParams\n",
        after="{t}from vllm import LLM, SamplingParams\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM902",
        name="deepspeed",
        summary="TODO: DeepSpeed.",
        rationale="DeepSpeed has no Neuron accelerator and the accelerate wizard rejects it on Neuron.",
        message='DeepSpeed does not run on Neuron; ZeRO-3 -> fsdp="full_shard auto_wrap" with fsdp_config={"fsdp_version": 2}, ZeRO-1/2 -> DDP or shard_grad_op',
        before="import deepspeed\n",
        after="{t}import deepspeed\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM903",
        name="cuda-runtime",
        summary="TODO: CUDA streams, events, graphs, nvtx, IPC.",
        rationale="No Neuron equivalent exists for CUDA streams, events, CUDA graphs, nvtx ranges, CUDA IPC or NCCL. "
        "Events get a text about timing, NCCL checks one about collectives; the rest this entry's.",
        message="no Neuron equivalent for this CUDA runtime API (streams, graphs, nvtx, IPC); remove it or keep it behind a CUDA check",
        before="import torch\nstream = torch.cuda.Stream()\n",
        after="import torch\n{t}stream = torch.cuda.Stream()\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM904",
        name="cuda-capability",
        summary="TODO: CUDA compute-capability checks.",
        rationale="`get_device_capability()` has no Neuron meaning and raises without CUDA; bf16 is supported on every "
        "Trainium generation. The call becomes `(8, 0)` (an Ampere-class answer), so checks such as `major >= "
        "8` choose bf16; the TODO asks to remove the check.",
        message="no compute capability on Neuron: get_device_capability() is now (8, 0), so capability checks take their bf16 path; bf16 is always supported, flash-attention never is",
        before="import torch\nmajor, _ = torch.cuda.get_device_capability()\n",
        after="import torch\n{t}major, _ = (8, 0)\n",
        safety="unsafe",
        safety_reason="capability checks now see (8, 0): code gated on major >= 8 takes its Ampere path (bf16)",
        todo=True,
    ),
    Rule(
        id="NM905",
        name="custom-kernels",
        summary="TODO: Triton, apex and custom CUDA extensions.",
        rationale="Triton kernels, apex fused optimizers/amp and `torch.utils.cpp_extension` CUDA builds are CUDA-only.",
        message="CUDA-only kernels; use torch.optim.AdamW / plain PyTorch ops (NKI for custom kernels)",
        before="import triton\n",
        after="{t}import triton\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM906",
        name="unsloth",
        summary="TODO: Unsloth.",
        rationale="Unsloth patches transformers/TRL with Triton kernels at import time and needs CUDA.",
        message="Unsloth needs CUDA; load with AutoModelForCausalLM.from_pretrained(dtype=torch.bfloat16) and peft.get_peft_model",
        before="from unsloth import FastLanguageModel\n",
        after="{t}from unsloth import FastLanguageModel\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM907",
        name="flash-attn-liger",
        summary="TODO: flash-attn and Liger kernels used directly.",
        rationale="The flash-attn package and Liger's Triton kernels are CUDA-only; monkeypatches such as "
        "`replace_llama_attn_with_flash_attn()` must go.",
        message='CUDA-only attention/loss kernels; use attn_implementation="sdpa" and torch.nn.functional.cross_entropy',
        before="from flash_attn import flash_attn_func\n",
        after="{t}from flash_attn import flash_attn_func\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM908",
        name="quantized-weights",
        summary="TODO: bitsandbytes / GPTQ / AWQ quantization.",
        rationale="Quantized kernels are CUDA-only. NM209 loads the model in bf16 instead: weights take about 4x "
        "(4-bit) or 2x (8-bit) more memory.",
        message="bitsandbytes quantization is CUDA-only; the model now loads in bf16 (~4x the 4-bit memory), consider FSDP or more NeuronCores",
        before="from transformers import BitsAndBytesConfig\nbnb_config = BitsAndBytesConfig(load_in_4bit=True)\n",
        after="from transformers import BitsAndBytesConfig\n{t}bnb_config = BitsAndBytesConfig(load_in_4bit=True)\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM909",
        name="gpu-memory-budget",
        summary="TODO: `max_memory={gpu: ...}` budgets.",
        rationale="GPU-indexed memory budgets do not apply to NeuronCores and big-model sharding via device_map does "
        "not exist on Neuron.",
        message="GPU memory budgets do not apply on Neuron; shard with FSDP2 or tensor parallelism instead",
        before='model = AutoModelForCausalLM.from_pretrained(name, max_memory={0: "40GiB"})\n',
        after='{t}model = AutoModelForCausalLM.from_pretrained(name, max_memory={0: "40GiB"})\n',
        safety="safe",
        todo=True,
    ),
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
    Rule(
        id="NM924",
        name="removed-trl-api",
        summary="TODO: TRL helpers removed in 1.x (`setup_chat_format`).",
        rationale="TRL 1.x removed `setup_chat_format` (it added ChatML tokens and resized the embeddings), "
        "so the import fails before anything runs, whether or not the script reaches a call. The import "
        "goes; each call keeps this TODO (it raises NameError if reached unchanged), so a script that calls "
        "it only for a tokenizer without a chat template runs. Its replacement, `clone_chat_template`, "
        "copies the template of another tokenizer, which is a choice of template a person has to make.",
        message="TRL 1.x removed setup_chat_format: use trl.clone_chat_template(model, tokenizer, "
        '"<id of a tokenizer with the chat template you want>") or set tokenizer.chat_template and '
        "model.resize_token_embeddings(len(tokenizer)) yourself",
        before="from trl import setup_chat_format\nmodel, tokenizer = setup_chat_format(model, tokenizer)\n",
        after="{t}model, tokenizer = setup_chat_format(model, tokenizer)\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM925",
        name="legacy-tensor-type",
        summary="TODO: legacy CUDA tensor types NM108 cannot rewrite.",
        rationale="`torch.cuda.FloatTensor` and the other legacy CUDA types raise without CUDA. NM108 rewrites casts and "
        "calls whose arguments are clearly sizes or data; a single argument that may be either, keywords, "
        "`isinstance` checks or the type passed on are left with this TODO. Under `NEURONCOMPAT_CUDA=redirect` "
        "the types build, cast and match tensors on the NeuronCore, so the script runs unchanged meanwhile.",
        message="legacy CUDA tensor type: use torch.empty(*size, dtype=..., device=...) for sizes, "
        "torch.tensor(data, dtype=..., device=...) for data, .to(device, dtype) for casts, x.dtype/x.device "
        "for checks; NEURONCOMPAT_CUDA=redirect runs it unchanged meanwhile",
        before="import torch\nnoise = torch.cuda.FloatTensor(batch)\n",
        after="import torch\n{t}noise = torch.cuda.FloatTensor(batch)\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM926",
        name="data-parallel",
        summary="TODO: `torch.nn.DataParallel`.",
        rationale="DataParallel runs one process over several devices and scatters each batch with CUDA's "
        "communication kernels (`torch.nn.parallel.comm`), which do not exist for NeuronCores: with more than "
        "one core it fails. On Neuron each process owns its cores: data parallelism is one process per core "
        "(torchrun) with DistributedDataParallel. A DataParallel behind a CUDA check (`device.type == "
        '"cuda"`, `torch.cuda.device_count() > 1`) keeps that check (NM104/NM103 leave it), so the block is '
        "skipped on Neuron as on any machine without CUDA.",
        message="nn.DataParallel scatters batches with CUDA kernels and fails on NeuronCores; for data parallelism "
        "launch one process per core with torchrun and wrap the model in DistributedDataParallel",
        before="import torch\nmodel = torch.nn.DataParallel(model)\n",
        after="import torch\n{t}model = torch.nn.DataParallel(model)\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM927",
        name="own-dtype-field",
        summary="TODO: a script's own `torch_dtype` argument field.",
        rationale="transformers 5 and TRL 1.x spell the loading dtype `dtype`, and neuron-migrate renames the recipe key "
        "(NM818) and the reads of TRL's ModelConfig (NM709) to match. A script whose own dataclass has a "
        "`torch_dtype` field and reads YAML recipes (`parse_yaml_file`, TrlParser's `--config`) gets the "
        "renamed key too, which HfArgumentParser then rejects. Renaming the field would break the launch "
        "lines that still pass `--torch_dtype`, so a person decides.",
        message="recipes migrated for transformers 5 / TRL 1.x set dtype, not torch_dtype (NM818): rename this field "
        "to dtype with its readers and launch flags, or keep the recipes' key torch_dtype",
        before='from dataclasses import dataclass\n\n\n@dataclass\nclass ModelArguments:\n    torch_dtype: str = "auto"\n\n\n'
        'args = parser.parse_yaml_file("recipe.yaml")\n',
        after='from dataclasses import dataclass\n\n\n@dataclass\nclass ModelArguments:\n    {t}    torch_dtype: str = "auto"\n\n\n'
        'args = parser.parse_yaml_file("recipe.yaml")\n',
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM928",
        name="hub-kernel-cuda-only",
        summary="TODO: `get_kernel(...)` of a Hub kernel repo with no Neuron build.",
        rationale="Hub kernels load the build for the machine's backend; Neuron's is `build/torch-neuron/` (pure Python "
        "and NKI), which `kernels-community` and the other repos in `migrate/kernel_repos.py` do not ship, so "
        "on Neuron `get_kernel` raises (the shim's `kernels` patch says so at the call, naming the torch op). "
        "The TODO names the op the kernel implements; a Neuron kernel repo, where one exists, is a choice "
        "for a person.",
        message=todo_message("kernels-community/activation"),
        before='from kernels import get_kernel\nactivation = get_kernel("kernels-community/activation", version=1)\n',
        after='from kernels import get_kernel\n{t}activation = get_kernel("kernels-community/activation", version=1)\n',
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM929",
        name="trainer-kwargs-moved-to-config",
        summary="TODO: TRL trainer keywords that moved to the trainer's config (`SFTTrainer(packing=True)`).",
        rationale="TRL 0.x trainers took data and length settings as keywords (`SFTTrainer(dataset_text_field=..., "
        "max_seq_length=..., packing=..., dataset_kwargs=...)`, `DPOTrainer(beta=..., max_length=...)`); TRL 1.x "
        "reads them only from the config passed as `args` (`SFTConfig`, `DPOConfig`; checked against trl 1.16.0's "
        "signatures), so the call is a TypeError. Moving them is a person's edit: `args` is often a "
        "`TrainingArguments` from the script's parser (philschmid's `run_fsdp_qlora.py`), which has no such "
        "fields, and dropping them would silently change packing and lengths.",
        message="TRL 1.x SFTTrainer no longer takes these keywords: set packing on the SFTConfig passed as args",
        before="from trl import SFTTrainer\ntrainer = SFTTrainer(model=model, args=args, packing=True)\n",
        after="from trl import SFTTrainer\n{t}trainer = SFTTrainer(model=model, args=args, packing=True)\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM931",
        name="sequential-cpu-offload",
        summary="TODO: diffusers' `enable_sequential_cpu_offload()`.",
        rationale="Sequential offload puts an accelerate hook on every leaf module that moves its weights to the device "
        "for each call and back: on Neuron that is a host-device copy per layer per step, the hooks break "
        "compiled graphs, and on the simulated device the hooks fail outright. Whole-pipeline placement, "
        "model offload or tensor parallelism fit Neuron.",
        message='sequential offload copies every layer to the NeuronCore per call and breaks compiled graphs: use pipe.to("neuron"), '
        "enable_model_cpu_offload() if the pipeline does not fit, or TensorParallelConfig for the transformer",
        before="from diffusers import FluxPipeline\npipe.enable_sequential_cpu_offload()\n",
        after="from diffusers import FluxPipeline\n{t}pipe.enable_sequential_cpu_offload()\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM932",
        name="pipeline-shape-loop",
        summary="TODO: pipeline calls whose shapes change in a loop.",
        rationale="A diffusion pipeline compiles its denoiser and `vae.decode` for one latent shape: height/width, "
        "batch x `num_images_per_prompt`, and CFG on or off (`guidance_scale <= 1` halves the denoiser batch) "
        "each make new graphs, about a minute each on Neuron, while steps, timesteps and seeds do not "
        "(measured on the simulated device). A loop that sweeps them compiles every iteration.",
        message=SHAPE_LOOP.format(names="height/width"),
        before="from diffusers import DiffusionPipeline\nfor size in (512, 768):\n"
        "    image = pipe(prompt, height=size, width=size).images[0]\n",
        after="from diffusers import DiffusionPipeline\n{t}for size in (512, 768):\n"
        "    image = pipe(prompt, height=size, width=size).images[0]\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM933",
        name="diffusers-quantization",
        summary="TODO: diffusers quantization backends.",
        rationale="diffusers' quantizers (bitsandbytes, torchao, quanto, GGUF, nunchaku) run CUDA kernels, and diffusers' "
        "tensor parallelism refuses quantized models. NM209 drops `quantization_config=` from `from_pretrained` "
        "loads, which then load unquantized in bf16 (2-4x the weight memory); a GGUF `from_single_file` "
        "checkpoint has no unquantized form and needs the original weights.",
        message="diffusers quantization runs CUDA kernels and TensorParallelConfig refuses quantized models: load the "
        "unquantized weights in bf16 (2-4x the memory) and shard the transformer with TensorParallelConfig if "
        "it does not fit one NeuronCore",
        before="from diffusers import PipelineQuantizationConfig\n"
        'quant = PipelineQuantizationConfig(quant_backend="bitsandbytes_4bit")\n',
        after="from diffusers import PipelineQuantizationConfig\n{t}"
        'quant = PipelineQuantizationConfig(quant_backend="bitsandbytes_4bit")\n',
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM934",
        name="optimum-diffusion-data-parallel",
        summary="TODO: Optimum Neuron's `device_ids` / `data_parallel_mode` for diffusion pipelines.",
        rationale="Optimum loaded a compiled UNet (or transformer) on two NeuronCores and split the CFG-doubled batch "
        "between them (`data_parallel_mode`, `device_ids=[0, 1]`). A native pipeline runs on one NeuronCore; "
        "more cores mean one process per core (each its own pipeline) or tensor parallelism of a transformer "
        "that has a plan (Flux, QwenImage).",
        message="Optimum split this pipeline's CFG batch over two NeuronCores; natively it runs on one: for more "
        "throughput start one process per core (torchrun) with its own prompts",
        before="from optimum.neuron import NeuronStableDiffusionPipeline\n"
        'pipe = NeuronStableDiffusionPipeline.from_pretrained("sd_neuron/", data_parallel_mode="unet")\n',
        after="from optimum.neuron import NeuronStableDiffusionPipeline\n{t}"
        'pipe = NeuronStableDiffusionPipeline.from_pretrained("sd_neuron/", data_parallel_mode="unet")\n',
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM935",
        name="device-module-memory-info",
        summary="TODO: `mem_get_info()` of a device module picked at run time.",
        rationale="Device-generic code asks the module of a device type for free memory: `getattr(torch, device_type, "
        "torch.cuda).mem_get_info()`, `torch.get_device_module(name).mem_get_info()`. TorchNeuron's "
        "`torch.neuron` has no `mem_get_info` (transformers #47029), so on Neuron the call fails. Where the "
        "type is the current accelerator's (`torch.accelerator.current_accelerator().type`, or no argument), "
        "NM104 rewrites it to `torch.accelerator.get_memory_info()`, the same `(free, total)`; for any other "
        "expression the codemod cannot tell which module it names, and leaves this TODO.",
        message="torch.neuron has no mem_get_info: if this device type is the current accelerator's, call "
        "torch.accelerator.get_memory_info() (the same (free, total)); otherwise keep this call off Neuron",
        before="import torch\nfree, total = getattr(torch, args.device_type).mem_get_info()\n",
        after="import torch\n{t}free, total = getattr(torch, args.device_type).mem_get_info()\n",
        safety="safe",
        todo=True,
    ),
)

# NM917 on an Optimum inference load that split the model over `num_cores`/`tensor_parallel_size` cores.
TP_LAUNCH = (
    "the export split this model over {cores} NeuronCores: torchrun --nproc_per_node {cores} shards it "
    "over them (tensor parallelism, one process per core); plain python loads it whole on one core"
)

# NM903's text per CUDA runtime API (`torch.cuda.<name>`); others get the entry's own text.
CUDA_RUNTIME_MESSAGES: dict[str, str] = {
    "nccl": (
        "NCCL is CUDA's collective library and does not exist on Neuron, whose collectives are the neuron "
        "process-group backend: drop this NCCL check (bf16 and collectives need no NCCL version there)"
    ),
    "Event": "CUDA events do not exist on Neuron; time with time.perf_counter() around torch.accelerator.synchronize()",
}

MESSAGES: dict[str, str] = {rule.id: rule.message for rule in RULES}
# TRL helpers removed in 1.x -> the NM924 TODO that says what replaces each.
REMOVED_TRL_API: dict[str, str] = {"setup_chat_format": MESSAGES["NM924"]}


def quantized_load_message(method: str) -> str:
    """NM908's text for a load that quantized with `method`: `"4bit"` (the catalogued text), `"8bit"`, or a config
    class (`GPTQConfig`): the memory the bf16 load now takes depends on what the quantized one saved."""
    if method == "4bit":
        return MESSAGES["NM908"]
    if method == "8bit":
        return MESSAGES["NM908"].replace("(~4x the 4-bit memory)", "(~2x the 8-bit memory)")
    return (
        f"{method} quantization runs CUDA kernels; load the unquantized model in bf16 instead (2-4x the quantized "
        "memory), consider FSDP or more NeuronCores"
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
