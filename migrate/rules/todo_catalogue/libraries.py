"""The TODOs for library changes no rewrite can settle: TRL helpers and keywords that moved or
went, a script's own `torch_dtype` field, Hub kernels without a Neuron build, and diffusers' offload,
quantization and shape-changing loops, which cost a compile per shape on Neuron.
"""

from __future__ import annotations

from migrate.kernel_repos import todo_message
from migrate.registry import Rule

# NM932 on a loop that passes the pipeline new values of the shape arguments {names} (`height/width`).
SHAPE_LOOP = (
    "this loop passes a new {names} to the pipeline each iteration: on Neuron every new height/width, "
    "batch x num_images_per_prompt or CFG on/off (guidance_scale crossing 1 halves the batch) compiles new "
    "denoiser and decode graphs, about a minute each; fix them, or warm up each combination you serve once"
)


RULES: tuple[Rule, ...] = (
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
)
