"""The diffusers rules on the cases their examples and fixtures do not show (issue 24).

CUDA diffusers code (NM131-NM133, NM231, NM331-NM332, NM932) and Optimum Neuron's diffusion
pipelines (NM531-NM534): what is rewritten, what is deliberately left alone, and that a second run
changes nothing.
"""

from __future__ import annotations

from migrate.dispatch import migrate_file
from migrate.engine import migrate_source
from migrate.options import Options
from migrate.results import FileResult

DIFFUSERS = "import torch\nfrom diffusers import DiffusionPipeline\n"
OPTIMUM = "import torch\nfrom optimum.neuron import {cls}\n"


def migrate(src: str) -> FileResult:
    result = migrate_source(src.encode(), "t.py", Options(shim=False))
    assert result.error is None, result.error
    if result.new is not None:
        again = migrate_source(result.new, "t.py", Options(shim=False))
        assert again.status == "unchanged", "a second run must change nothing"
    return result


def run(src: str) -> str:
    result = migrate(src)
    return result.new.decode() if result.new else src


# ---- NM131 generators -------------------------------------------------------------------------


def test_positional_cuda_generator_is_a_cpu_one_in_any_script():
    assert 'torch.Generator("cpu")' in run('import torch\ng = torch.Generator("cuda:1").manual_seed(0)\n')


def test_a_device_variable_generator_changes_only_in_diffusers_scripts():
    line = "g = torch.Generator(device=device)\n"
    assert run("import torch\n" + line) == "import torch\n" + line
    assert 'g = torch.Generator(device="cpu")' in run(DIFFUSERS + line)
    assert 'torch.Generator("cpu")' in run(DIFFUSERS + 'g = torch.Generator("neuron")\n')


def test_cpu_and_default_generators_are_kept():
    src = DIFFUSERS + 'a = torch.Generator()\nb = torch.Generator("cpu")\n'
    assert run(src) == src


def test_a_generator_that_feeds_device_draws_stays_on_the_device():
    src = (
        DIFFUSERS + "noise_gen = torch.Generator(device=accelerator.device).manual_seed(0)\n"
        "val_gen = torch.Generator(device=accelerator.device).manual_seed(0)\n"
        "noise = torch.randn(shape, device=accelerator.device, generator=noise_gen)\n"
        "image = pipe(prompt, generator=val_gen).images[0]\n"
    )
    result = migrate(src)
    out = result.new.decode()
    assert "noise_gen = torch.Generator(device=accelerator.device)" in out
    assert 'val_gen = torch.Generator(device="cpu")' in out
    assert any("noise_gen" in w.message for w in result.warnings)


def test_a_cpu_draw_does_not_hold_a_generator_on_the_device():
    src = DIFFUSERS + "g = torch.Generator(device=device)\nx = torch.randn(4, generator=g)\n"
    assert 'g = torch.Generator(device="cpu")' in run(src)


# ---- NM203's diffusers gate, NM209's added dtype ------------------------------------------------


def test_diffusers_loads_keep_torch_dtype_unless_the_script_requires_040():
    load = 'pipe = DiffusionPipeline.from_pretrained("id", torch_dtype=torch.bfloat16)\n'
    text = 'enc = CLIPTextModel.from_pretrained("id", torch_dtype=torch.bfloat16)\n'
    src = DIFFUSERS + "from transformers import CLIPTextModel\n" + load + text
    out = run(src)
    assert load in out  # diffusers <= 0.39 would ignore dtype= and load in fp32
    assert 'CLIPTextModel.from_pretrained("id", dtype=torch.bfloat16)' in out  # transformers 5 reads dtype=
    required = src.replace(
        "from diffusers import DiffusionPipeline\n",
        'from diffusers import DiffusionPipeline\nfrom diffusers.utils import check_min_version\ncheck_min_version("0.40.0")\n',
    )
    assert 'DiffusionPipeline.from_pretrained("id", dtype=torch.bfloat16)' in run(required)


def test_diffusers_script_dict_keys_keep_torch_dtype():
    src = DIFFUSERS + 'kwargs = {"torch_dtype": torch.bfloat16}\npipe_kwargs["torch_dtype"] = torch.bfloat16\n'
    assert run(src) == src


def test_an_unquantized_diffusers_load_gets_torch_dtype():
    load = 'unet = UNet2DConditionModel.from_pretrained("id", quantization_config=q)\n'
    src = DIFFUSERS.replace("import DiffusionPipeline", "import BitsAndBytesConfig, UNet2DConditionModel")
    always = run(src + "q = BitsAndBytesConfig(load_in_4bit=True)\n" + load)
    assert 'UNet2DConditionModel.from_pretrained("id", torch_dtype=torch.bfloat16)' in always
    # a config that may be None (#27 C9): the unquantized path keeps diffusers' default dtype, None (fp32)
    assert "torch_dtype=torch.bfloat16 if q is not None else None," in run(src + load)


# ---- NM231, NM331, NM332, NM133 -------------------------------------------------------------------


def test_attention_backends():
    src = (
        DIFFUSERS + "from diffusers.models.attention_dispatch import attention_backend\n"
        'pipe.transformer.set_attention_backend("native")\n'
        "pipe.transformer.set_attention_backend(args.backend)\n"
        'with attention_backend("_flash_3_hub"):\n    pipe(prompt)\n'
        'os.environ["DIFFUSERS_ATTN_BACKEND"] = "sage"\n'
    )
    out = run(src)
    assert 'set_attention_backend("native")' in out and "set_attention_backend(args.backend)" in out
    assert 'with attention_backend("native"):' in out
    assert 'os.environ["DIFFUSERS_ATTN_BACKEND"] = "native"' in out


def test_flex_attention_backend_is_kept():
    """PyTorch FlexAttention runs on Neuron since Neuron 2.34: NM231 leaves it (#32)."""
    src = (
        DIFFUSERS + "from diffusers.models.attention_dispatch import attention_backend\n"
        'pipe.transformer.set_attention_backend("flex")\n'
        'with attention_backend("flex"):\n    pipe(prompt)\n'
        'os.environ["DIFFUSERS_ATTN_BACKEND"] = "flex"\n'
    )
    assert run(src) == src


def test_attention_backend_calls_outside_diffusers_scripts_are_kept():
    src = 'import torch\nmodel.set_attention_backend("flash")\n'
    assert run(src) == src


def test_regional_compile_keeps_what_the_script_chose():
    src = DIFFUSERS + 'pipe.transformer.compile_repeated_blocks(fullgraph=False, dynamic=True, mode="max-autotune")\n'
    out = run(src)
    assert 'compile_repeated_blocks(fullgraph=False, dynamic=True, backend="neuron")' in out


def test_vae_compile_forms():
    src = (
        DIFFUSERS + "vae = torch.compile(vae)\npipe.unet = torch.compile(pipe.unet)\npipe.vae = torch.compile(other)\n"
    )
    out = run(src)
    assert 'vae.decode = torch.compile(vae.decode, backend="neuron", dynamic=False)' in out
    assert 'pipe.unet = torch.compile(pipe.unet, backend="neuron", dynamic=False)' in out
    assert 'pipe.vae = torch.compile(other, backend="neuron", dynamic=False)' in out  # not the VAE it replaces


def test_group_offload_streams_go_together():
    src = DIFFUSERS + "pipe.unet.enable_group_offload(device, use_stream=True, record_stream=True)\n"
    assert "enable_group_offload(device, use_stream=False, record_stream=False)" in run(src)


# ---- NM132 tuning flags ----------------------------------------------------------------------


def test_tuning_flags_go_only_in_diffusers_scripts():
    flags = "torch.backends.cudnn.benchmark = True\ntorch.backends.cudnn.allow_tf32 = True\n"
    assert run("import torch\n" + flags + "x = 1\n") == "import torch\n" + flags + "x = 1\n"
    assert run(DIFFUSERS + flags + "x = 1\n") == DIFFUSERS + "x = 1\n"


def test_a_comment_above_a_removed_flag_stays():
    src = DIFFUSERS + "# faster matmuls\ntorch.backends.cuda.matmul.allow_tf32 = True\nx = 1\n"
    assert run(src) == DIFFUSERS + "# faster matmuls\nx = 1\n"


def test_channels_last_forms():
    src = (
        DIFFUSERS + "unet = unet.to(memory_format=torch.channels_last)\n"
        "copy = unet.to(memory_format=torch.channels_last)\n"
        "unet.to(device, memory_format=torch.channels_last)\n"
        "x = x.contiguous(memory_format=torch.channels_last)\n"
    )
    assert run(src) == DIFFUSERS + "copy = unet\nunet.to(device)\nx = x.contiguous()\n"


# ---- NM932 shapes that change in a loop ---------------------------------------------------------


def test_loops_that_keep_the_shapes_get_no_todo():
    src = DIFFUSERS + "for prompt in prompts:\n    image = pipe(prompt, height=512, width=512).images[0]\n"
    assert run(src) == src


def test_a_loop_value_unpacked_in_the_body_is_followed():
    src = DIFFUSERS + "for size in sizes:\n    h, w = size\n    pipe(prompt, height=h, width=w)\n"
    assert "NM932): this loop passes a new height/width" in run(src)


def test_a_function_defined_in_a_loop_runs_nothing():
    src = DIFFUSERS + "for n in counts:\n    def f():\n        return pipe(prompt, num_images_per_prompt=n)\n"
    assert run(src) == src


# ---- Optimum Neuron pipelines --------------------------------------------------------------------


def test_fp32_export_and_an_unassigned_load():
    src = OPTIMUM.format(cls="NeuronStableDiffusionPipeline") + (
        "def load(model_id):\n"
        '    return NeuronStableDiffusionPipeline.from_pretrained(model_id, export=True, auto_cast="none")\n'
    )
    result = migrate(src)
    out = result.new.decode()
    assert 'StableDiffusionPipeline.from_pretrained(model_id, torch_dtype=torch.float32).to("neuron")' in out
    assert "torch.compile" not in out
    assert any("compile its denoiser" in w.message for w in result.warnings)


def test_call_shapes_keep_the_callers_values():
    src = OPTIMUM.format(cls="NeuronStableDiffusionPipeline") + (
        "pipe = NeuronStableDiffusionPipeline.from_pretrained(m, export=True, height=512, width=512)\n"
        "a = pipe(p, height=768)\nb = pipe(**call_kwargs)\n"
    )
    result = migrate(src)
    out = result.new.decode()
    assert "a = pipe(p, height=768, width=512)" in out and "b = pipe(**call_kwargs)" in out
    assert any("height=768 kept" in w.message for w in result.warnings)


def test_tensor_parallel_without_a_plan_and_lora_on_a_sharded_transformer_are_todos():
    pixart = OPTIMUM.format(cls="NeuronPixArtAlphaPipeline") + (
        "pipe = NeuronPixArtAlphaPipeline.from_pretrained(m, export=True, tensor_parallel_size=2)\n"
    )
    out = run(pixart)
    assert "NM919): diffusers has no tensor-parallel plan" in out and "TensorParallelConfig" not in out
    flux = OPTIMUM.format(cls="NeuronFluxPipeline") + (
        'pipe = NeuronFluxPipeline.from_pretrained(m, export=True, tensor_parallel_size=2, lora_model_ids="a/b")\n'
    )
    out = run(flux)
    assert "NM919): LoRA cannot be loaded into a sharded transformer" in out and "pipe.load_lora_weights" not in out


def test_lora_ids_in_a_variable_are_a_todo():
    src = OPTIMUM.format(cls="NeuronStableDiffusionPipeline") + (
        "pipe = NeuronStableDiffusionPipeline.from_pretrained(m, export=True, lora_model_ids=loras)\n"
    )
    out = run(src)
    assert "NM919): map lora_model_ids" in out and "pipe.load_lora_weights(loras" not in out
    assert "lora_model_ids=loras" in out  # kept beside its TODO, for the person who ports it


def test_a_negative_prompt_on_a_sharded_pipeline_is_a_todo():
    src = OPTIMUM.format(cls="NeuronFluxPipeline") + (
        "pipe = NeuronFluxPipeline.from_pretrained(m, export=True, tensor_parallel_size=2)\n"
        'image = pipe(prompt, negative_prompt="blurry", true_cfg_scale=4.0).images[0]\n'
    )
    out = run(src)
    assert "NM919): encode the negative prompt on the CPU too" in out
    assert 'image = pipe(prompt, negative_prompt="blurry", true_cfg_scale=4.0).images[0]' in out


def test_a_folder_saved_by_the_script_carries_its_shapes():
    src = OPTIMUM.format(cls="NeuronStableDiffusionPipeline") + (
        'out = "sd_neuron/"\n'
        "pipe = NeuronStableDiffusionPipeline.from_pretrained(m, export=True, height=512, width=512)\n"
        "pipe.save_pretrained(out)\n"
        "again = NeuronStableDiffusionPipeline.from_pretrained(out)\n"
        "image = again(prompt).images[0]\n"
    )
    out = run(src)
    assert "NM915" not in out
    assert "image = again(prompt, height=512, width=512).images[0]" in out


def test_push_to_hub_maps_its_arguments():
    src = OPTIMUM.format(cls="NeuronStableDiffusionPipeline") + (
        "pipe = NeuronStableDiffusionPipeline.from_pretrained(m, export=True)\n"
        'pipe.push_to_hub("dir", "org/repo", private=True, use_auth_token=token)\n'
        'pipe.push_to_hub("dir")\n'
    )
    out = run(src)
    assert 'pipe.push_to_hub("org/repo", private=True, token=token)' in out
    assert 'pipe.push_to_hub("dir")' in out  # no repository given: left as written


def test_diffusion_export_on_a_launch_line_names_its_shapes():
    line = "optimum-cli export neuron --model=org/sd --height 512 --width=768 sd/\n"
    out = migrate_file(line.encode(), "run.sh", Options()).new.decode()
    assert "load org/sd with its diffusers pipeline class" in out and "(height=512, width=768)" in out
    llm = "optimum-cli export neuron --model gpt2 --sequence_length 128 gpt2/\n"
    assert "with its diffusers pipeline class" not in migrate_file(llm.encode(), "run.sh", Options()).new.decode()
