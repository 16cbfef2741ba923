"""NM8xx: the rule records for configs and launch files, and the TODO texts their code emits.

Like every family, the records are data for `--explain`, `docs/rules.md` and `--select`; the
examples are real files (`language` says which kind) and `tests/migrate/test_rules.py` runs
each through `migrate.dispatch` to check that it yields its `after`.
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.todo_catalogue import TP_ADVICE

TODO_TEXT = {
    "NM804": "NEURON_RT_VISIBLE_CORES={value} is set at run time: it names logical NeuronCores, not GPUs (GPU i "
    "is core i), and must be one contiguous increasing run: a single core, or under LNC=2 whole pairs such as "
    "0,1 / 2,3 / 0-3",
    "NM811": "DeepSpeed has no Neuron backend: use FSDP2 (ZeRO-3 -> full_shard with fsdp_version 2, "
    "ZeRO-1/2 -> plain data parallel) launched by torchrun or accelerate launch",
    "NM812": "removed the neuron_parallel_compile prefix: native TorchNeuron compiles on first run, so this "
    "line now trains for real; delete it if it was only a precompile pass before the real run",
    "NM813": "optimum-cli export neuron is not needed: native TorchNeuron loads the Hugging Face checkpoint "
    'directly (from_pretrained(model_id, device_map="neuron")) and compiles on first run; load '
    "the original model id instead of the exported directory",
    "NM813_DIFFUSION": "optimum-cli export neuron is not needed: load {model} with its diffusers pipeline class, "
    '.to("neuron") and torch.compile the denoiser and vae.decode (compiled on the first call); pass the export '
    "shapes to every pipe(...) call ({shapes}): Optimum's pipelines used them whatever the call said",
    "NM814": "{names}: CUDA-only, does not build or run on Neuron ({action}); sdpa attention, bf16 weights "
    "and model.generate take their place",
    "NM815": "nvidia-smi has no Neuron equivalent for these options: list devices with neuron-ls, watch "
    "utilisation with neuron-top",
    "NM818": "torch_dtype is dtype in transformers 5 and TRL 1.x, which is set here too: keep one of them",
    "NM816": "tensor parallelism came from --tensor_parallel_size, which TrainingArguments rejects (removed "
    "here): " + TP_ADVICE,
    "NM816_UNSEEN": "--tensor_parallel_size {n} goes to a script named at run time: if it parses TrainingArguments "
    "(or Optimum's NeuronTrainingArguments), drop the flag and in the script " + TP_ADVICE,
}


def _todo(rule_id: str, text: str) -> str:
    return f"# TODO(neuron-migrate {rule_id}): {text}\n"


RULES: tuple[Rule, ...] = (
    Rule(
        id="NM801",
        name="accelerate-multi-neuron",
        summary="accelerate config `distributed_type: MULTI_GPU` -> `MULTI_NEURON`.",
        rationale="accelerate 1.15 has `DistributedType.MULTI_NEURON` (backend `neuron`); `MULTI_GPU` asks for "
        "NCCL and CUDA devices. Only files that look like accelerate configs (`distributed_type` "
        "plus another key `accelerate config` writes) are touched.",
        before="compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU  # 8 GPUs\nnum_processes: 8\n",
        after="compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_NEURON  # 8 GPUs\nnum_processes: 8\n",
        safety="safe",
        language="yaml",
    ),
    Rule(
        id="NM802",
        name="config-bf16",
        summary="fp16 -> bf16 in configs: accelerate `mixed_precision: fp16`, recipe `fp16: true`.",
        rationale="Trainium computes in bf16; the fp16 path needs a GradScaler whose Neuron support is "
        "unconfirmed. In a recipe `fp16` is renamed to `bf16` (or, when `bf16` is there too, "
        "`fp16: false` and `bf16: true`).",
        before="distributed_type: MULTI_NEURON\nmixed_precision: fp16\nnum_processes: 2\n",
        after="distributed_type: MULTI_NEURON\nmixed_precision: bf16\nnum_processes: 2\n",
        safety="unsafe",
        safety_reason="bf16 keeps fewer mantissa bits than fp16: numerics and loss curves change",
        language="yaml",
    ),
    Rule(
        id="NM803",
        name="visible-cores",
        summary="`CUDA_VISIBLE_DEVICES` -> `NEURON_RT_VISIBLE_CORES`, GPU i -> logical NeuronCore i.",
        rationale="The Neuron runtime ignores `CUDA_VISIBLE_DEVICES`. `NEURON_RT_VISIBLE_CORES` names logical "
        "NeuronCores, the ones `torch.neuron` counts, so GPU i becomes core i under any LNC (`cuda:i` and "
        "`neuron:i` are then the same device), as the shim's `visible_cores` patch translates it; the set is "
        "written in increasing order, each core once. A set that cannot work as NeuronCores gets TODO NM804. "
        "`$CUDA_VISIBLE_DEVICES` expansions are renamed too.",
        before="CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=2 train.py\n",
        after="NEURON_RT_VISIBLE_CORES=0,1 torchrun --nproc_per_node=2 train.py\n",
        safety="safe",
        language="shell",
    ),
    Rule(
        id="NM804",
        name="aligned-cores",
        summary="TODO: a NeuronCore set that cannot work (not one contiguous run, or not whole pairs), or that cannot be checked.",
        rationale="The Neuron runtime takes a list or range of logical NeuronCores that must be contiguous, in "
        "consecutive increasing order (`3,5,6` is its invalid example); the TRL Trainium guide adds that "
        "`0,1`, `2,3`, `0-3` work and `1,2` does not, read (as the shim reads it, docs/gaps.md#visible_cores) "
        "as: under LNC=2 a set of several cores covers whole pairs 2k,2k+1. The rules are the shim's "
        "(`neuroncompat/core_sets.py`). accelerate copies `gpu_ids` (config or `--gpu_ids`) into "
        "`NEURON_RT_VISIBLE_CORES` verbatim, so they are checked too, also against `num_processes` (one "
        "core per process). A `CUDA_VISIBLE_DEVICES` set that NM803 translates to such a set, and a value "
        "computed at run time, get the TODO too. The set is never changed silently: that would change which "
        "cores run.",
        before="NEURON_RT_VISIBLE_CORES=1,2 python train.py\n",
        after=_todo(
            "NM804",
            "NEURON_RT_VISIBLE_CORES=1,2 is not made of whole pairs: the TRL Trainium guide lists 0,1, 2,3 and 0-3 "
            "as working and 1,2 as not (collectives), i.e. under LNC=2 (the default) a set of more than one logical "
            "core starts at an even core and has an even count; use 0,1 or 2,3, 0-3 for all of them, or a single core",
        )
        + "NEURON_RT_VISIBLE_CORES=1,2 python train.py\n",
        safety="safe",
        todo=True,
        language="shell",
    ),
    Rule(
        id="NM805",
        name="config-sdpa",
        summary="Recipe `attn_implementation: flash_attention_2` -> `sdpa` (also nested, e.g. `model_init_kwargs`); Liger off.",
        rationale="flash-attn and Liger's Triton kernels are CUDA-only; `sdpa` lowers to ATen scaled-dot-product "
        "attention, which TorchNeuron provides, and without Liger TRL uses the plain PyTorch loss. The same "
        "on launch lines: `--attn_implementation flash_attention_2` -> `sdpa`, `use_liger_kernel: true` -> "
        "`false`, `--use_liger_kernel` -> `--use_liger_kernel False`.",
        before="model_name_or_path: Qwen/Qwen3-0.6B\nattn_implementation: flash_attention_2\noutput_dir: out\n",
        after="model_name_or_path: Qwen/Qwen3-0.6B\nattn_implementation: sdpa\noutput_dir: out\n",
        safety="safe",
        language="yaml",
    ),
    Rule(
        id="NM818",
        name="config-dtype-key",
        summary="Recipe `torch_dtype:` -> `dtype:` (also nested, e.g. `model_init_kwargs`).",
        rationale="transformers 5 renamed the loading argument and TRL 1.x's `ModelConfig` followed, so "
        '`TrlParser` rejects a recipe with a top-level `torch_dtype` ("Unknown arguments from config '
        'file"); nested in `model_init_kwargs` it still loads, with a deprecation warning. As NM203 '
        "does for Python. Where the mapping already has `dtype`, a TODO instead.",
        before="model_name_or_path: Qwen/Qwen3-0.6B\ntorch_dtype: bfloat16\noutput_dir: out\n",
        after="model_name_or_path: Qwen/Qwen3-0.6B\ndtype: bfloat16\noutput_dir: out\n",
        safety="safe",
        language="yaml",
    ),
    Rule(
        id="NM806",
        name="config-no-bnb",
        summary="Recipe `load_in_4bit: true` / `load_in_8bit: true` -> `false`.",
        rationale="bitsandbytes kernels are CUDA-only; the model loads in bf16 instead (about 4x the 4-bit "
        "weight memory), as NM209 does for Python, and the NM908 TODO above the key says so.",
        before="model_name_or_path: Qwen/Qwen3-0.6B\nload_in_4bit: true\noutput_dir: out\n",
        after="model_name_or_path: Qwen/Qwen3-0.6B\nload_in_4bit: false\noutput_dir: out\n",
        safety="unsafe",
        safety_reason="the model loads unquantized in bf16: about 2-4x the weight memory, and numerics differ",
        language="yaml",
    ),
    Rule(
        id="NM807",
        name="config-no-vllm",
        summary="Recipe `use_vllm: true` -> `false` plus `cache_implementation: static`.",
        rationale="vLLM does not run inside a TorchNeuron process; GRPO/RLOO then generate with "
        "`model.generate`, and a static cache keeps its shapes fixed for the compiler (NM303 in Python).",
        before="output_dir: out\nuse_vllm: true\nvllm_mode: colocate\n",
        after="output_dir: out\nuse_vllm: false\ncache_implementation: static\nvllm_mode: colocate\n",
        safety="unsafe",
        safety_reason="generation moves from vLLM to `model.generate`: slower, and sampled completions differ",
        language="yaml",
    ),
    Rule(
        id="NM808",
        name="config-drift-keys",
        summary="Recipe keys transformers 5 / TRL 1.x renamed or removed: `evaluation_strategy:` -> `eval_strategy:`, "
        "`max_seq_length:` -> `max_length:`, `overwrite_output_dir:` and `logging_dir:` removed, ...",
        rationale="The NM7xx table (`drift.FIELDS`) applied to recipe keys, which `TrlParser` and "
        "`HfArgumentParser.parse_yaml_file` reject by name before training starts. Renamed keys keep their "
        "value (`warmup_ratio` -> `warmup_steps`, which takes a ratio below 1; `no_cuda` -> `use_cpu`; "
        "`group_by_length: true` -> `train_sampling_strategy: group_by_length`). Removed keys lose their line, "
        "noted in the report with what replaced them; an entry that is not a line of its own, or defines an "
        "anchor, gets a TODO instead. When the new key is set too, a TODO asks which to keep.",
        before="output_dir: out\nevaluation_strategy: steps\noverwrite_output_dir: true  # reruns\nmax_seq_length: 2048\n",
        after="output_dir: out\neval_strategy: steps\nmax_length: 2048\n",
        safety="unsafe",
        safety_reason="removed keys (`logging_dir`, `max_prompt_length`, ...) no longer take effect",
        language="yaml",
    ),
    Rule(
        id="NM809",
        name="config-no-tf32",
        summary="Recipe `tf32: true` is commented out.",
        rationale="`TrainingArguments(tf32=True)` raises on any non-CUDA host. The line is kept as a comment, "
        "so the setting is visible in review.",
        before="output_dir: out\ntf32: true\n",
        after="output_dir: out\n# tf32: true  # neuron-migrate NM809: tf32 is CUDA-only\n",
        safety="safe",
        language="yaml",
    ),
    Rule(
        id="NM810",
        name="launch-bf16",
        summary="Launch lines: `--fp16` -> `--bf16`, `--mixed_precision fp16` -> `bf16`.",
        rationale="The same precision change as NM201 for arguments given on the command line of python, "
        "torchrun, accelerate launch and friends. `--fp16 False` and lines that already pass "
        "`--bf16` are left alone.",
        before="accelerate launch --mixed_precision fp16 train.py --fp16\n",
        after="accelerate launch --mixed_precision bf16 train.py --bf16\n",
        safety="unsafe",
        safety_reason="bf16 keeps fewer mantissa bits than fp16: numerics and loss curves change",
        language="shell",
    ),
    Rule(
        id="NM811",
        name="deepspeed-launch",
        summary="TODO: the `deepspeed` launcher, `--deepspeed` configs, accelerate `distributed_type: DEEPSPEED`.",
        rationale="DeepSpeed has no Neuron accelerator and the accelerate wizard refuses it on Neuron; the ZeRO "
        "stage decides the FSDP2 replacement, which needs a person.",
        before="deepspeed --num_gpus 8 train.py --deepspeed ds_z3.json\n",
        after=_todo("NM811", TODO_TEXT["NM811"]) + "deepspeed --num_gpus 8 train.py --deepspeed ds_z3.json\n",
        safety="safe",
        todo=True,
        language="shell",
    ),
    Rule(
        id="NM812",
        name="parallel-compile-prefix",
        summary="Optimum Neuron's `neuron_parallel_compile` prefix is removed (noted in the report).",
        rationale="It ran a graph-extraction pass to fill the XLA compile cache. Native TorchNeuron runs eagerly "
        "and `torch.compile` compiles on first call, so the prefix has nothing to do; the command "
        "after it now trains for real, which the report points out.",
        before="MALLOC_ARENA_MAX=64 neuron_parallel_compile torchrun --nproc_per_node=2 train.py\n",
        after="MALLOC_ARENA_MAX=64 torchrun --nproc_per_node=2 train.py\n",
        safety="unsafe",
        safety_reason="the command after the prefix now trains for real instead of only extracting graphs",
        language="shell",
    ),
    Rule(
        id="NM813",
        name="optimum-export",
        summary="TODO: `optimum-cli export neuron` is not needed.",
        rationale='Native TorchNeuron loads the Hugging Face checkpoint itself (`device_map="neuron"`) and '
        "compiles on first run; the exported directory's later uses must point at the original model "
        "id, which only a person can connect. A diffusion export (`--height`, `--width`, "
        "`--num_images_per_prompt`) gets the shapes in its TODO: the native pipeline must be called with them "
        "(NM532 does it where the script exports too).",
        before="optimum-cli export neuron --model gpt2 --batch_size 1 --sequence_length 128 gpt2_neuron/\n",
        after=_todo("NM813", TODO_TEXT["NM813"])
        + "optimum-cli export neuron --model gpt2 --batch_size 1 --sequence_length 128 gpt2_neuron/\n",
        safety="safe",
        todo=True,
        language="shell",
    ),
    Rule(
        id="NM814",
        name="cuda-pip-packages",
        summary="CUDA-only packages (flash-attn, bitsandbytes, vllm, xformers, ...) leave `pip install` lines.",
        rationale="They fail to build or import without CUDA. Other packages on the line stay; a line left "
        "with nothing to install is commented out. Also applies to notebook `!pip`/`%pip` magics.",
        before="pip install -U transformers flash-attn bitsandbytes\n",
        after=_todo(
            "NM814", TODO_TEXT["NM814"].format(names="flash-attn, bitsandbytes", action="removed from this install")
        )
        + "pip install -U transformers\n",
        safety="safe",
        language="shell",
    ),
    Rule(
        id="NM815",
        name="nvidia-smi",
        summary="`nvidia-smi` -> `neuron-ls`; with options, a TODO.",
        rationale="neuron-ls lists the Neuron devices and cores; nvidia-smi's query options have no "
        "one-to-one equivalent (neuron-top shows utilisation).",
        before="nvidia-smi\n",
        after="neuron-ls\n",
        safety="safe",
        language="shell",
    ),
    Rule(
        id="NM816",
        name="optimum-launch-flags",
        summary="Launch lines: Optimum's Neuron-only training flags (`--tensor_parallel_size`, `--zero_1`, `--async_save`, "
        "...) are removed, each noted.",
        rationale="Once the script's `NeuronTrainingArguments` is `TrainingArguments` (NM501), `HfArgumentParser` rejects "
        "these flags before training starts. The fields are NM503's; each flag goes with its value (`--zero_1`, "
        "`--zero_1 true`, `--async_save=false`: a bool field takes a value only when one follows it) and the "
        "report says what replaced it. `--tensor_parallel_size N` (N > 1, or set at run time) gets a TODO: the "
        "degree now lives in the script's `from_pretrained(distributed_config=DistributedConfig(tp_size=N, "
        "...))` (NM505, NM914). Pipeline parallelism, sequence parallelism and ZeRO-1 that were on get the "
        "NM910-NM912 texts. Only python, torchrun, accelerate launch and trl lines of a script that parses "
        "training arguments are touched: a `neuron_parallel_compile` run, or one passing a flag only "
        "TrainingArguments takes (`--do_train`, `--per_device_train_batch_size`, ...), so a vLLM script's own "
        "`--tensor_parallel_size` stays.",
        before="torchrun --nproc_per_node 32 train.py --do_train --tensor_parallel_size 8 --async_save --output_dir out\n",
        after=_todo("NM816", TODO_TEXT["NM816"].format(n="8"))
        + "torchrun --nproc_per_node 32 train.py --do_train --output_dir out\n",
        safety="unsafe",
        safety_reason="the dropped Neuron-only features (ZeRO-1, async save, fused QKV, ...) no longer take effect",
        language="shell",
    ),
    Rule(
        id="NM817",
        name="drift-launch-flags",
        summary="Launch lines: training flags transformers 5 / TRL 1.x renamed or removed (`--evaluation_strategy` -> "
        "`--eval_strategy`, `--overwrite_output_dir` and `--logging_dir` removed, ...).",
        rationale="The NM7xx table on the command line, where `HfArgumentParser` and `TrlParser` reject the old names. "
        "Renamed flags keep their value (`--warmup_ratio r` -> `--warmup_steps r`, `--no_cuda` -> `--use_cpu`, "
        "`--group_by_length` -> `--train_sampling_strategy group_by_length`); removed ones go with their value, "
        "noted with what replaced them. `--max_seq_length` -> `--max_length` and `--max_prompt_length` apply to "
        "TRL's training commands only (`trl sft`, `trl/scripts/dpo.py`): other scripts often define a "
        "`max_seq_length` of their own. The same launch lines as NM816.",
        before="torchrun train.py --do_train --evaluation_strategy steps --overwrite_output_dir --output_dir out\n",
        after="torchrun train.py --do_train --eval_strategy steps --output_dir out\n",
        safety="unsafe",
        safety_reason="removed flags (`--logging_dir`, `--max_prompt_length`, ...) no longer take effect",
        language="shell",
    ),
)
