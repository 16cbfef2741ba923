"""``neuroncompat simulate`` per diffusers pipeline call (issue 24): the call's parameters, the graphs and eager
shapes it compiled by denoising step, the cause of each recompile, the VAE decode and text-encoder placement,
and, across ranks, whether every rank drew the same initial latents.

The report logic is tested on records written as a process writes them; the recording on the tiny Stable
Diffusion pipeline of ``neuroncompat.testing`` (diffusers 0.42.1's test configs) on the simulated device. The
graph counts are the ones docs/gaps.md ("diffusers dry run") gives: one size compiles
2 graphs (UNet, decode) and nothing after step 1; CFG off adds the UNet at batch 1, a second size and
``num_images_per_prompt=2`` each add a UNet and a decode graph.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch

from neuroncompat.simulate import kinds, markdown, pipeline_report, report
from neuroncompat.simulate.record import Recorder

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "simulate-report.schema.json").read_text())
UNET = "diffusers/models/unets/unet_2d_condition.py:978 (UNet2DConditionModel.forward)"
DECODE = "diffusers/models/autoencoders/autoencoder_kl.py:213 (AutoencoderKL.decode)"


def _params(**changes: Any) -> dict[str, Any]:
    params = {
        "height": 64,
        "width": 64,
        "default_size": True,
        "batch": 1,
        "num_images_per_prompt": 1,
        "cfg": True,
        "guidance_scale": 6.0,
        "true_cfg_scale": None,
        "steps": 3,
        "max_sequence_length": None,
        "output_type": "np",
        "prompt_length": 77,
    }
    return {**params, **changes}


def _event(what: str, phase: str, step: int | None = None, kind: str = "graph", ops: int = 10) -> dict[str, Any]:
    return {"kind": kind, "what": what, "ops": ops, "phase": phase, "step": step}


def _call(index: int, params: dict[str, Any], events: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    call = {
        "index": index,
        "pipeline": "StableDiffusionPipeline",
        "instance": 1,
        "user": f"gen.py:{index} (<module>)",
        "failed": False,
        "params": params,
        "steps_run": params["steps"],
        "denoiser_calls": params["steps"],
        "events": events,
        "dropped_events": 0,
        "latents": "0123456789abcdef",
        "vae": {
            "decode_ran": True,
            "decode_compiled": True,
            "module_compiled": False,
            "decode_ops": 87,
            "tiling": False,
            "slicing": False,
            "device": "neuron:0",
        },
        "text_encoders": [{"name": "text_encoder", "device": "cpu", "calls": 1}],
    }
    return {**call, **changes}


def _record(calls: list[dict[str, Any]], rank: int = 0, world_size: int = 1) -> dict[str, Any]:
    return {
        "rank": rank,
        "local_rank": rank,
        "world_size": world_size,
        "pid": 100 + rank,
        "argv": ["gen.py"],
        "compiled": [],
        "eager": [],
        "dropped_calls": 0,
        "findings": [],
        "dropped_findings": 0,
        "pipelines": {"calls": calls, "dropped_calls": 0},
    }


def _built(*records: dict[str, Any], strict: tuple[str, ...] = ()) -> dict[str, Any]:
    built = report.build(list(records), ["python", "gen.py"], 0, strict=strict)
    jsonschema.validate(built, SCHEMA)
    return built


def test_each_recompile_is_attributed_to_the_parameter_that_changed() -> None:
    first = [_event(UNET, "step", 1), _event(DECODE, "after")]
    calls = [
        _call(1, _params(), first),
        _call(2, _params(steps=5), []),
        _call(3, _params(cfg=False, guidance_scale=1.0), [_event(UNET, "step", 1)]),
        _call(4, _params(height=96, default_size=False), first),
        _call(5, _params(num_images_per_prompt=2), first),
    ]
    (rank,) = _built(_record(calls))["ranks"]
    got = [
        (c["new_graphs"]["total"], [(x["param"], x["before"], x["after"]) for x in c["causes"]])
        for c in rank["pipeline_calls"]
    ]
    assert got == [
        (2, [("first_call", None, None)]),
        (0, []),
        (1, [("cfg", "on", "off")]),
        (2, [("size", "64x64", "96x64")]),
        (2, [("num_images_per_prompt", "1", "2")]),
    ]
    one = rank["pipeline_calls"][0]["new_graphs"]
    assert (one["step_1"], one["after_denoising"], one["later_steps"]) == (1, 1, [])
    fixes = {c["fix"]["id"] for call in rank["pipeline_calls"] for c in call["causes"] if c["fix"]}
    assert fixes == {"consistent_cfg", "fixed_resolution", "fixed_images_per_prompt"}


def test_the_text_report_shows_counts_causes_and_fixes() -> None:
    calls = [
        _call(1, _params(), [_event(UNET, "step", 1), _event(DECODE, "after")]),
        _call(2, _params(cfg=False, guidance_scale=1.0), [_event(UNET, "step", 1)]),
    ]
    text = report.render_text(_built(_record(calls)))
    assert "#1 StableDiffusionPipeline at gen.py:1 (<module>): 64x64 (default size), batch 1 x 1 image(s)" in text
    assert "2 new graph(s) (1 at step 1, 1 after the loop); after step 1: 0" in text
    assert "cause (vs #1): cfg on -> off" in text and "fix: keep guidance on for every call" in text
    assert "vae.decode compiled (87 ops) on neuron:0; text_encoder on cpu" in text
    assert "| 0 | #2 StableDiffusionPipeline |" in markdown.render(_built(_record(calls)))


def test_a_graph_after_step_1_is_a_bug_strict_fails_on() -> None:
    events = [_event(UNET, "step", 1), _event("gen.py:4 (bump)", "step", 2), _event("gen.py:4 (bump)", "step", 3)]
    built = _built(_record([_call(1, _params(), events)]), strict=kinds.STRICT_DEFAULT)
    (call,) = built["ranks"][0]["pipeline_calls"]
    assert call["new_graphs"]["later_steps"] == [{"step": 2, "count": 1}, {"step": 3, "count": 1}]
    assert call["later_step_fix"]["id"] == "static_step"
    assert [v["kind"] for v in built["strict"]["violations"]] == ["step_recompile"]
    assert "BUG: 2 graph(s) compiled after step 1 (gen.py:4 (bump))" in report.render_text(built)


def test_same_parameters_with_new_graphs_are_unexplained() -> None:
    calls = [_call(1, _params(), [_event(UNET, "step", 1)]), _call(2, _params(), [_event(UNET, "step", 1)])]
    (_, second) = _built(_record(calls))["ranks"][0]["pipeline_calls"]
    assert [c["param"] for c in second["causes"]] == ["unexplained"] and "#1" in second["causes"][0]["why"]


def test_decode_and_text_encoder_advice() -> None:
    eager_vae = {
        "decode_ran": True,
        "decode_compiled": False,
        "module_compiled": True,
        "decode_ops": None,
        "tiling": False,
        "slicing": False,
        "device": "neuron:0",
    }
    tiled = {**eager_vae, "decode_compiled": True, "module_compiled": False, "tiling": True, "decode_ops": 2597}
    on_device = [{"name": "text_encoder", "device": "neuron:0", "calls": 1}]
    events = [_event("CLIPTextModel", "before", kind="eager"), _event(UNET, "step", 1)]
    calls = [
        _call(1, _params(), events, vae=eager_vae, text_encoders=on_device),
        _call(2, _params(height=96, default_size=False), [_event(DECODE, "after", ops=2597)], vae=tiled),
    ]
    first, second = _built(_record(calls))["ranks"][0]["pipeline_calls"]
    assert [n["fix"]["id"] for n in first["notes"]] == ["compile_decode", "text_encoder_cpu"]
    assert [n["fix"]["id"] for n in second["notes"]] == ["decode_unrolled"]
    assert "one unrolled graph of 2597 ops" in second["notes"][0]["what"]


def test_ranks_that_drew_different_latents_are_reported() -> None:
    same = [_record([_call(1, _params(), [])], rank=r, world_size=2) for r in (0, 1)]
    assert _built(*same)["pipeline_latents"] == {
        "ranks": [0, 1],
        "calls": 1,
        "identical": True,
        "differ_in_calls": [],
        "fix": None,
    }
    other = _record([_call(1, _params(), [], latents="fedcba9876543210")], rank=1, world_size=2)
    built = _built(same[0], other)
    assert built["pipeline_latents"]["differ_in_calls"] == [1]
    assert "initial latents DIFFER between ranks 0, 1 in pipeline call(s) #1" in report.render_text(built)
    assert pipeline_report.latents_across_ranks(built["ranks"][:1]) is None


# -- recorded on the simulated device --------------------------------------------------------------------------
@pytest.fixture
def sd_pipeline(neuron: object) -> Iterator[Any]:
    """The tiny SD pipeline on the device, with Dynamo's static shapes (the shim's dynamic_shapes patch)."""
    pytest.importorskip("diffusers")
    from neuroncompat.testing import stable_diffusion_pipeline

    with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
        yield stable_diffusion_pipeline().to("neuron")


def _recorded(run: Any) -> dict[str, Any]:
    recorder = Recorder()
    recorder.start()
    try:
        run()
    finally:
        recorder.stop()
    return _built(json.loads(json.dumps(recorder.snapshot())))["ranks"][0]  # as the process writes it


def _generator() -> torch.Generator:
    return torch.Generator("cpu").manual_seed(0)


def test_an_eager_call_is_recorded_and_leaves_nothing_behind(sd_pipeline: Any) -> None:
    """A per-step compiled callback is the later-step bug; every hook is gone after the call and the run."""
    from diffusers import StableDiffusionPipeline

    bump = torch.compile(lambda latents, step: latents + 0 * step, backend="neuron")

    def on_step_end(pipe: Any, step: int, timestep: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {"latents": bump(kwargs["latents"], step)}  # a Python int per step: a graph per step

    def run() -> None:
        sd_pipeline(
            "a cat",
            num_inference_steps=3,
            guidance_scale=1.0,
            generator=_generator(),
            output_type="latent",
            callback_on_step_end=on_step_end,
        )
        assert "step" not in vars(sd_pipeline.scheduler) and "prepare_latents" not in vars(sd_pipeline)

    (call,) = _recorded(run)["pipeline_calls"]
    assert call["params"] == {
        "height": 64,
        "width": 64,
        "default_size": True,
        "batch": 1,
        "num_images_per_prompt": 1,
        "cfg": False,
        "guidance_scale": 1.0,
        "true_cfg_scale": None,
        "steps": 3,
        "max_sequence_length": None,
        "output_type": "latent",
        "prompt_length": 77,
    }
    assert call["steps_run"] == 3 and call["vae"]["decode_ran"] is False
    assert call["text_encoders"] == [{"name": "text_encoder", "device": "neuron:0", "calls": 1}]
    assert call["new_eager_shapes"]["before_denoising"] == 1  # CLIP on the device
    assert call["new_eager_shapes"]["step_1"] == 1  # the eager UNet
    assert [(g["phase"], g["step"]) for g in call["graphs"]] == [("step", 1), ("step", 2), ("after", None)]
    assert len(call["later_step_compiles"]) == 1
    assert not hasattr(StableDiffusionPipeline.__dict__["__call__"], "_neuroncompat_pipeline_call")


def test_initial_latents_hash_is_the_cpu_generators(sd_pipeline: Any) -> None:
    def run() -> None:
        for _ in range(2):
            sd_pipeline("a cat", num_inference_steps=1, generator=_generator(), output_type="latent")

    first, second = _recorded(run)["pipeline_calls"]
    assert first["latents"] == second["latents"] is not None


@pytest.mark.slow  # compiles the UNet 4 times and the decode 3 times (about a minute on 2 CPU cores)
def test_tiny_sd_graph_counts_per_call(sd_pipeline: Any) -> None:
    """The measured counts (docs/gaps.md, "diffusers dry run"), each attributed to its cause."""
    options = {"backend": "neuron", "fullgraph": True, "dynamic": False}
    sd_pipeline.unet = torch.compile(sd_pipeline.unet, **options)
    sd_pipeline.vae.decode = torch.compile(sd_pipeline.vae.decode, **options)

    def run() -> None:
        for changes in (
            {},
            {"num_inference_steps": 3},
            {"guidance_scale": 1.0},
            {"height": 96, "width": 64},
            {"num_images_per_prompt": 2},
        ):
            sd_pipeline("a cat", **{"num_inference_steps": 2, "guidance_scale": 6.0, **changes}, generator=_generator())

    calls = _recorded(run)["pipeline_calls"]
    got = [
        (
            c["new_graphs"]["step_1"],
            c["new_graphs"]["after_denoising"],
            len(c["later_step_compiles"]),
            [x["param"] for x in c["causes"]],
        )
        for c in calls
    ]
    assert got == [
        (1, 1, 0, ["first_call"]),
        (0, 0, 0, []),
        (1, 0, 0, ["cfg"]),
        (1, 1, 0, ["size"]),
        (1, 1, 0, ["num_images_per_prompt"]),
    ]
    assert all(c["vae"]["decode_compiled"] and c["vae"]["decode_ops"] for c in calls)


@pytest.mark.slow  # compiles the QwenImage blocks twice (about 13 s on 2 CPU cores)
def test_qwenimage_recompile_is_attributed_to_the_prompt_length(neuron: object) -> None:
    """QwenImage pads its embeddings to the longest prompt only: a new token count is a new block graph."""
    pytest.importorskip("diffusers")
    from neuroncompat.testing import tiny_pipeline

    with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
        pipe = tiny_pipeline("qwenimage").to("neuron")
        pipe.transformer.compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)

        def run() -> None:
            for length in (7, 7, 9):
                embeds = torch.randn(1, length, 16).to("neuron")
                mask = torch.ones(1, length, dtype=torch.long, device="neuron")
                pipe(
                    prompt_embeds=embeds,
                    prompt_embeds_mask=mask,
                    height=32,
                    width=32,
                    num_inference_steps=2,
                    true_cfg_scale=1.0,
                    generator=_generator(),
                    output_type="latent",
                )

        calls = _recorded(run)["pipeline_calls"]
    assert [c["params"]["prompt_length"] for c in calls] == [7, 7, 9]
    assert [c["new_graphs"]["step_1"] for c in calls] == [1, 0, 1]
    assert [(x["param"], x["before"], x["after"]) for x in calls[2]["causes"]] == [("prompt_length", "7", "9")]
    assert calls[2]["causes"][0]["fix"]["id"] == "pad_prompt"
