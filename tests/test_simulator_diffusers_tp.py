"""Flux tensor parallelism on 2 simulated ranks against the unsharded CPU run, under ``neuroncompat simulate``
(issue 24).

The script is the TorchNeuron launch post's pattern on the tiny Flux pipeline of ``neuroncompat.testing``:
process group ``neuron``, the transformer sharded with ``TensorParallelConfig(mesh=DeviceMesh("neuron", ranks))``
(diffusers 0.42.1's Neuron TP backend, ``hooks/tensor_parallel_neuron.py``), regional compile of its repeated
blocks and of ``vae.decode``, the prompt encoded on the CPU, the noise from ``torch.Generator("cpu")``. Both
ranks must give the CPU's image (fp32; the row-wise layers' all-reduce adds in another order, so within 1e-5)
and the dry run must report that they drew the same initial latents and compiled nothing after step 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("diffusers")

from launch import simulated_env  # noqa: E402  (after the skip)

from neuroncompat.testing import tiny_pipeline  # noqa: E402

pytestmark = pytest.mark.slow  # two ranks import torch and diffusers and compile the blocks

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
PROMPT = "a cat"
CALL = {"height": 16, "width": 16, "num_inference_steps": 2, "output_type": "np"}

SCRIPT = f"""
import os
import numpy as np
import torch
import torch.distributed as dist
from diffusers import TensorParallelConfig
from torch.distributed.device_mesh import DeviceMesh
from neuroncompat.testing import tiny_pipeline

dist.init_process_group("neuron")
device = f"neuron:{{os.environ['LOCAL_RANK']}}"
pipe = tiny_pipeline("flux")
pipe.transformer.to(device)
mesh = DeviceMesh("neuron", list(range(dist.get_world_size())))
pipe.transformer.enable_parallelism(config=TensorParallelConfig(mesh=mesh))
pipe.vae.to(device)
pipe.transformer.compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)
pipe.vae.decode = torch.compile(pipe.vae.decode, backend="neuron", fullgraph=True, dynamic=False)
embeds, pooled, _ = pipe.encode_prompt(prompt={PROMPT!r}, prompt_2=None, device="cpu", max_sequence_length=48)
image = pipe(
    prompt_embeds=embeds.to(device), pooled_prompt_embeds=pooled.to(device),
    generator=torch.Generator("cpu").manual_seed(0), **{CALL!r},
).images
np.save(f"rank{{dist.get_rank()}}.npy", image)
dist.destroy_process_group()
"""


def _cpu_image() -> np.ndarray:
    pipe = tiny_pipeline("flux")
    embeds, pooled, _ = pipe.encode_prompt(prompt=PROMPT, prompt_2=None, device="cpu", max_sequence_length=48)
    generator = torch.Generator("cpu").manual_seed(0)
    return pipe(prompt_embeds=embeds, pooled_prompt_embeds=pooled, generator=generator, **CALL).images


def test_flux_tp_on_two_ranks_equals_the_unsharded_cpu_run(tmp_path: Path) -> None:
    (tmp_path / "flux_tp.py").write_text(SCRIPT)
    command = [sys.executable, "-m", "neuroncompat.cli", "simulate", "--format", "json", "-o", "report.json"]
    command += ["--", TORCHRUN, "--nproc_per_node=2", "flux_tp.py"]
    env = simulated_env(NEURONCOMPAT_SIMULATE="0")  # simulate turns the device on in each rank itself
    result = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-5000:]

    expected = _cpu_image()
    rank0, rank1 = (np.load(tmp_path / f"rank{rank}.npy") for rank in (0, 1))
    np.testing.assert_array_equal(rank0, rank1)
    np.testing.assert_allclose(rank0, expected, atol=1e-5)

    report = json.loads((tmp_path / "report.json").read_text())
    assert report["pipeline_latents"]["identical"] is True and report["pipeline_latents"]["ranks"] == [0, 1]
    for rank in report["ranks"]:
        (call,) = rank["pipeline_calls"]
        assert call["pipeline"] == "FluxPipeline" and call["later_step_compiles"] == []
        graphs = sorted(graph["what"].rsplit("(", 1)[1] for graph in call["graphs"])
        assert graphs == [
            "AutoencoderKL.decode)",
            "FluxSingleTransformerBlock.forward)",
            "FluxTransformerBlock.forward)",
        ]
        assert [t["calls"] for t in call["text_encoders"]] == [0, 0]  # encoded on the CPU before the call
