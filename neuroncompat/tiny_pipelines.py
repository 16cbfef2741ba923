"""Tiny diffusers pipelines built offline: diffusers' own test configs with locally made tokenizers.

diffusers' pipeline tests build their components from configs (``get_dummy_components``) but fetch the
tokenizers (and the tiny T5/Qwen configs) from the hub. The builders here use the same component configs,
read from diffusers' ``tests/pipelines/*/test_*.py`` (the config of each is named in its docstring), with
tokenizers made locally, so a pipeline runs offline in about a second on the CPU and takes the real diffusers
code paths on the simulated device. docs/simulator.md ("Tiny diffusers pipelines") gives their sizes (SD 39k
parameters, SDXL 812k, Flux 185k, QwenImage with no text encoder: the call passes embeddings) and why each
tokenizer is made as it is.

Each ``*_pipeline(seed)`` returns a pipeline in memory; :func:`tiny_pipeline` picks one by kind and
:func:`build_tiny_pipeline` saves it, so ``DiffusionPipeline.from_pretrained(path)`` loads it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

PIPELINE_KINDS = ("sd", "sdxl", "flux", "qwenimage")

_CLIP_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def build_clip_tokenizer(path: str | Path) -> Path:
    """Save a ``CLIPTokenizer`` with a letter-level vocabulary (no merges) to ``path``.

    Ids: ``<|startoftext|>`` 0, ``<|endoftext|>`` 1 (also the end of text), ``!`` 2 (padding), then each letter
    and its end-of-word form: what the CLIP text encoder config of :func:`build_stable_diffusion` expects.
    """
    import json

    from transformers import CLIPTokenizer

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1, "!": 2}
    for letter in _CLIP_LETTERS:
        vocab[letter] = len(vocab)
        vocab[f"{letter}</w>"] = len(vocab)
    (path / "vocab.json").write_text(json.dumps(vocab))
    (path / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(path / "vocab.json"), str(path / "merges.txt"), model_max_length=77, pad_token="!")
    tokenizer.save_pretrained(path)
    return path


def stable_diffusion_pipeline(seed: int = 0) -> Any:
    """A tiny ``StableDiffusionPipeline`` in memory: diffusers' test configs (39k parameters, 64x64 images).

    UNet, VAE and CLIP text encoder as in diffusers' ``tests/pipelines/stable_diffusion/test_stable_diffusion.py``
    ``get_dummy_components`` (each initialised from ``seed``), its DDIM scheduler with ``steps_offset=1`` (what
    diffusers warns an older config to set), no safety checker, and the local tokenizer of
    :func:`build_clip_tokenizer`.
    """
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        block_out_channels=(4, 8),
        layers_per_block=1,
        sample_size=32,
        in_channels=4,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=8,
        norm_num_groups=2,
    )
    scheduler = DDIMScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        clip_sample=False,
        set_alpha_to_one=False,
        steps_offset=1,
    )
    torch.manual_seed(seed)
    vae = AutoencoderKL(
        block_out_channels=[4, 8],
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 2,
        up_block_types=["UpDecoderBlock2D"] * 2,
        latent_channels=4,
        norm_num_groups=2,
    )
    torch.manual_seed(seed)
    text_config = CLIPTextConfig(
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        hidden_size=8,
        intermediate_size=16,
        layer_norm_eps=1e-5,
        num_attention_heads=2,
        num_hidden_layers=2,
        vocab_size=1000,
    )
    text_encoder = CLIPTextModel(text_config)
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer = CLIPTokenizer.from_pretrained(build_clip_tokenizer(scratch))
    return _as_loaded(
        StableDiffusionPipeline(
            unet=unet,
            scheduler=scheduler,
            vae=vae,
            text_encoder=text_encoder,
            tokenizer=tokenizer,
            safety_checker=None,
            feature_extractor=None,
            image_encoder=None,
            requires_safety_checker=False,
        )
    )


def build_stable_diffusion(path: str | Path, seed: int = 0) -> Path:
    """Save :func:`stable_diffusion_pipeline` to ``path`` (``DiffusionPipeline.from_pretrained(path)`` loads it)."""
    path = Path(path)
    pipeline: Any = stable_diffusion_pipeline(seed)  # diffusers declares save_pretrained on a mixin mypy misses
    pipeline.save_pretrained(path)
    return path


def _as_loaded(pipeline: Any) -> Any:
    """The pipeline in eval mode, as ``from_pretrained`` returns its models: built from configs they are in
    training mode, and T5's dropout would draw from each device's own random stream."""
    for component in pipeline.components.values():
        if hasattr(component, "eval"):
            component.eval()
    return pipeline


def _clip_text_config(**overrides: Any) -> Any:
    """diffusers' SDXL/Flux test CLIP text config, with the ids of :func:`build_clip_tokenizer`."""
    from transformers import CLIPTextConfig

    config = {
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 2,
        "hidden_size": 32,
        "intermediate_size": 37,
        "layer_norm_eps": 1e-5,
        "num_attention_heads": 4,
        "num_hidden_layers": 5,
        "vocab_size": 1000,
        "hidden_act": "gelu",
        "projection_dim": 32,
    }
    return CLIPTextConfig(**{**config, **overrides})


def _clip_tokenizer() -> Any:
    from transformers import CLIPTokenizer

    with tempfile.TemporaryDirectory() as scratch:
        return CLIPTokenizer.from_pretrained(build_clip_tokenizer(scratch))


def stable_diffusion_xl_pipeline(seed: int = 0) -> Any:
    """A tiny ``StableDiffusionXLPipeline`` (812k parameters, 64x64 images).

    The components of diffusers' ``tests/pipelines/stable_diffusion_xl/test_stable_diffusion_xl.py``
    ``get_dummy_components``: a UNet with ``text_time`` added conditioning, an Euler scheduler with leading
    timesteps, a 2-block VAE and two CLIP text encoders (the second with projection), both with the local
    tokenizer.
    """
    import torch
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionXLPipeline, UNet2DConditionModel
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        block_out_channels=(2, 4),
        layers_per_block=2,
        sample_size=32,
        in_channels=4,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        attention_head_dim=(2, 4),
        use_linear_projection=True,
        addition_embed_type="text_time",
        addition_time_embed_dim=8,
        transformer_layers_per_block=(1, 2),
        projection_class_embeddings_input_dim=80,  # 6 * 8 + 32
        cross_attention_dim=64,
        norm_num_groups=1,
    )
    scheduler = EulerDiscreteScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        steps_offset=1,
        beta_schedule="scaled_linear",
        timestep_spacing="leading",
    )
    torch.manual_seed(seed)
    vae = AutoencoderKL(
        block_out_channels=[32, 64],
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D", "DownEncoderBlock2D"],
        up_block_types=["UpDecoderBlock2D", "UpDecoderBlock2D"],
        latent_channels=4,
        sample_size=128,
    )
    torch.manual_seed(seed)
    text_encoder = CLIPTextModel(_clip_text_config())
    text_encoder_2 = CLIPTextModelWithProjection(_clip_text_config())
    tokenizer = _clip_tokenizer()
    return _as_loaded(
        StableDiffusionXLPipeline(
            unet=unet,
            scheduler=scheduler,
            vae=vae,
            text_encoder=text_encoder,
            tokenizer=tokenizer,
            text_encoder_2=text_encoder_2,
            tokenizer_2=tokenizer,
            image_encoder=None,
            feature_extractor=None,
        )
    )


def flux_pipeline(seed: int = 0) -> Any:
    """A tiny ``FluxPipeline`` (185k parameters; call it at 16x16 with ``max_sequence_length=48``).

    The components of diffusers' ``tests/pipelines/flux/test_pipeline_flux.py`` ``get_dummy_components``: a
    transformer of 1 double and 1 single block (its ``_tp_plan`` shards it under ``TensorParallelConfig``), a
    CLIP text encoder with the local CLIP tokenizer, a 2-layer T5 encoder (``tiny-random-t5``'s sizes) with a
    local word-level tokenizer, a 1-block VAE and the flow-matching Euler scheduler.
    """
    import torch
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
    from transformers import CLIPTextModel, PreTrainedTokenizerFast, T5Config, T5EncoderModel

    from neuroncompat.tiny_text import build_tokenizer

    torch.manual_seed(seed)
    transformer = FluxTransformer2DModel(
        patch_size=1,
        in_channels=4,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        axes_dims_rope=[4, 4, 8],
    )
    torch.manual_seed(seed)
    text_encoder = CLIPTextModel(_clip_text_config())
    torch.manual_seed(seed)
    t5 = T5Config(
        vocab_size=1000, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4, relative_attention_num_buckets=8
    )
    text_encoder_2 = T5EncoderModel(t5)
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer_2 = PreTrainedTokenizerFast.from_pretrained(build_tokenizer(scratch), model_max_length=48)
    torch.manual_seed(seed)
    vae = AutoencoderKL(
        sample_size=32,
        in_channels=3,
        out_channels=3,
        block_out_channels=(4,),
        layers_per_block=1,
        latent_channels=1,
        norm_num_groups=1,
        use_quant_conv=False,
        use_post_quant_conv=False,
        shift_factor=0.0609,
        scaling_factor=1.5035,
    )
    return _as_loaded(
        FluxPipeline(
            scheduler=FlowMatchEulerDiscreteScheduler(),
            vae=vae,
            transformer=transformer,
            text_encoder=text_encoder,
            tokenizer=_clip_tokenizer(),
            text_encoder_2=text_encoder_2,
            tokenizer_2=tokenizer_2,
        )
    )


def qwenimage_pipeline(seed: int = 0) -> Any:
    """A tiny ``QwenImagePipeline`` with no text encoder: call it with ``prompt_embeds`` (``(B, L, 16)``) and
    ``prompt_embeds_mask`` (``(B, L)``) at 32x32.

    The transformer and VAE of diffusers' ``tests/pipelines/qwenimage/test_qwenimage.py``
    ``get_dummy_components``; the Qwen2.5-VL text encoder and its tokenizer come from the hub there, and the
    pipeline only needs their embeddings. Its rotary embeddings are complex64 (diffusers 0.42).
    """
    import torch
    from diffusers import (
        AutoencoderKLQwenImage,
        FlowMatchEulerDiscreteScheduler,
        QwenImagePipeline,
        QwenImageTransformer2DModel,
    )

    torch.manual_seed(seed)
    transformer = QwenImageTransformer2DModel(
        patch_size=2,
        in_channels=16,
        out_channels=4,
        num_layers=2,
        attention_head_dim=16,
        num_attention_heads=3,
        joint_attention_dim=16,
        guidance_embeds=False,
        axes_dims_rope=(8, 4, 4),
    )
    torch.manual_seed(seed)
    z_dim = 4
    vae = AutoencoderKLQwenImage(
        base_dim=z_dim * 6,
        z_dim=z_dim,
        dim_mult=[1, 2, 4],
        num_res_blocks=1,
        temperal_downsample=[False, True],
        latents_mean=[0.0] * z_dim,
        latents_std=[1.0] * z_dim,
    )
    return _as_loaded(
        QwenImagePipeline(
            scheduler=FlowMatchEulerDiscreteScheduler(),
            vae=vae,
            text_encoder=None,
            tokenizer=None,
            transformer=transformer,
        )
    )


_BUILDERS = {
    "sd": stable_diffusion_pipeline,
    "sdxl": stable_diffusion_xl_pipeline,
    "flux": flux_pipeline,
    "qwenimage": qwenimage_pipeline,
}


def tiny_pipeline(kind: str, seed: int = 0) -> Any:
    """The tiny pipeline of ``kind`` (one of :data:`PIPELINE_KINDS`) in memory."""
    if kind not in _BUILDERS:
        raise ValueError(f"unknown pipeline kind {kind!r}; expected one of {', '.join(PIPELINE_KINDS)}")
    return _BUILDERS[kind](seed)


def build_tiny_pipeline(kind: str, path: str | Path, seed: int = 0) -> Path:
    """Save :func:`tiny_pipeline` of ``kind`` to ``path`` (``DiffusionPipeline.from_pretrained(path)`` loads it)."""
    path = Path(path)
    tiny_pipeline(kind, seed).save_pretrained(path)
    return path
