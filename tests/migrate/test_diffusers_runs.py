"""The migrated Optimum Flux tensor-parallel fixture runs on the simulated device, 1 and 2 processes (issue 24).

The original needs optimum-neuron and cannot run here; the reference is the same tiny Flux pipeline
run with plain diffusers on CPU in bf16, its prompt encoded on the CPU and its noise drawn from
`torch.Generator("cpu").manual_seed(0)`, which is what the migration does. The migration must give
that image in one process (transformer whole on one core) and on both of 2 torchrun ranks
(transformer sharded with `TensorParallelConfig`): identical on the ranks, equal to the CPU within
bf16 rounding of the pixels.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="runs a migrated script on the simulator: needs torch")
pytest.importorskip("diffusers", reason="runs a diffusers pipeline")

from launch import simulated_env, torchrun  # noqa: E402  (imported after the skips)

pytestmark = pytest.mark.slow  # three processes import torch, transformers and diffusers

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "optimum" / "flux_tensor_parallel.expected.py"
PROMPT = "a cat holding a sign"
ARGS = ["--prompt", PROMPT, "--height", "16", "--width", "16", "--steps", "2", "--max_sequence_length", "48"]

# The tiny Flux pipeline of diffusers' own tests (tests/pipelines/flux), with local tokenizers.
BUILD = """
import sys, torch
from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel, PreTrainedTokenizerFast
from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
from neuroncompat.testing import build_tokenizer
torch.manual_seed(0)
words = build_tokenizer(sys.argv[1] + "-tokenizer")
transformer = FluxTransformer2DModel(
    patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16, num_attention_heads=2,
    joint_attention_dim=32, pooled_projection_dim=32, axes_dims_rope=[4, 4, 8],
)
clip = CLIPTextModel(CLIPTextConfig(
    bos_token_id=0, eos_token_id=2, hidden_size=32, intermediate_size=37, num_attention_heads=4, num_hidden_layers=5,
    pad_token_id=1, vocab_size=1000, hidden_act="gelu", projection_dim=32,
))
t5 = T5EncoderModel(T5Config(vocab_size=1000, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4,
                             relative_attention_num_buckets=8))
vae = AutoencoderKL(
    sample_size=32, in_channels=3, out_channels=3, block_out_channels=(4,), layers_per_block=1, latent_channels=1,
    norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False, shift_factor=0.0609, scaling_factor=1.5035,
)
FluxPipeline(
    scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, transformer=transformer,
    text_encoder=clip, tokenizer=PreTrainedTokenizerFast.from_pretrained(words, model_max_length=77),
    text_encoder_2=t5, tokenizer_2=PreTrainedTokenizerFast.from_pretrained(words, model_max_length=48),
).save_pretrained(sys.argv[1])
"""

REFERENCE = """
import sys, torch
from diffusers import FluxPipeline
pipe = FluxPipeline.from_pretrained(sys.argv[1], torch_dtype=torch.bfloat16)
embeds, pooled, _ = pipe.encode_prompt(prompt=sys.argv[2], prompt_2=None, device="cpu", max_sequence_length=48)
image = pipe(prompt_embeds=embeds, pooled_prompt_embeds=pooled, guidance_scale=0.0, num_inference_steps=2, height=16,
             width=16, generator=torch.Generator("cpu").manual_seed(0)).images[0]
image.save(sys.argv[3])
"""

# `python -m neuroncompat SCRIPT ARGS`, each rank saving its image under its own name.
PER_RANK = """
import os, sys
from PIL import Image
from neuroncompat.runner import run
save = Image.Image.save
Image.Image.save = lambda self, path, *a, **k: save(self, f"{path}.rank{os.environ.get('RANK', '0')}.png", *a, **k)
run(sys.argv[1:])
"""


def _python(code: str, *args: str, cwd: Path, simulate: bool) -> None:
    env = simulated_env(NEURONCOMPAT_SIMULATE="1" if simulate else "0")
    command = [sys.executable, "-c", code, *args]
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}"


def _pixels(path: Path) -> torch.Tensor:
    import numpy
    from PIL import Image

    with Image.open(path) as image:
        return torch.from_numpy(numpy.asarray(image.convert("RGB"), dtype=numpy.int16))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("flux")
    _python(BUILD, str(root / "tiny-flux"), cwd=root, simulate=False)
    _python(REFERENCE, str(root / "tiny-flux"), PROMPT, str(root / "cpu.png"), cwd=root, simulate=False)
    (root / "per_rank.py").write_text(PER_RANK)
    return root


def test_migrated_flux_tp_runs_in_one_process(workdir: Path) -> None:
    _python(PER_RANK, str(FIXTURE), "--model", "tiny-flux", *ARGS, "--output", "one.png", cwd=workdir, simulate=True)
    assert torch.equal(_pixels(workdir / "one.png.rank0.png"), _pixels(workdir / "cpu.png"))


@pytest.mark.ranks
def test_migrated_flux_tp_shards_over_two_ranks(workdir: Path) -> None:
    args = [str(FIXTURE), "--model", "tiny-flux", *ARGS, "--output", "tp.png"]
    torchrun(workdir / "per_rank.py", args, cwd=workdir, nproc=2)
    rank0, rank1 = _pixels(workdir / "tp.png.rank0.png"), _pixels(workdir / "tp.png.rank1.png")
    assert torch.equal(rank0, rank1), "every rank must draw the same noise and make the same image"
    assert (rank0 - _pixels(workdir / "cpu.png")).abs().max() <= 2  # bf16 rounding: 0.0078 of the range
