"""``pipeline_device``: transformers' pipeline() runs on the NeuronCore, not silently on the CPU."""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType

import pytest
import torch


def _generate(pipe: object) -> str:
    return pipe("the neuron core", max_new_tokens=4, do_sample=False)[0]["generated_text"]  # type: ignore[operator]


def test_gap_pipeline_runs_on_cpu_without_the_patch(shim: ModuleType, tiny_qwen: Path) -> None:
    from transformers import pipeline

    assert pipeline("text-generation", model=str(tiny_qwen)).device == torch.device("cpu")
    assert pipeline("text-generation", model=str(tiny_qwen), device=1).device == torch.device("cpu")
    # no CUDA here: the CPU build says "Torch not compiled with CUDA enabled", the default (CUDA)
    # build "Found no NVIDIA driver on your system"; either way the pipeline cannot start
    with pytest.raises((AssertionError, RuntimeError), match="CUDA|NVIDIA"):
        pipeline("text-generation", model=str(tiny_qwen), device="cuda")


def test_pipeline_defaults_to_the_neuron_core(
    shim: ModuleType, tiny_qwen: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers import pipeline

    expected = _generate(pipeline("text-generation", model=str(tiny_qwen), device="cpu"))
    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        pipe = pipeline("text-generation", model=str(tiny_qwen))
    assert pipe.device == torch.device("neuron", 0)
    assert {p.device for p in pipe.model.parameters()} == {torch.device("neuron", 0)}
    assert _generate(pipe) == expected
    assert "[pipeline_device] pipeline(device=None) -> neuron:0" in caplog.text
    assert shim.status()["pipeline_device"].state == "applied"


@pytest.mark.parametrize(
    ("device", "expected"),
    [(1, "neuron:1"), ("cuda", "neuron:0"), ("cuda:1", "neuron:1"), (torch.device("cuda", 1), "neuron:1")],
)
def test_int_and_cuda_devices_map_to_neuron_cores(
    shim: ModuleType, tiny_qwen: Path, device: object, expected: str
) -> None:
    from transformers import pipeline

    shim.apply()
    pipe = pipeline("text-generation", model=str(tiny_qwen), device=device)
    assert pipe.device == torch.device(expected)
    assert {p.device for p in pipe.model.parameters()} == {torch.device(expected)}


@pytest.mark.parametrize("device", [-1, "cpu", torch.device("cpu"), "neuron:1"])
def test_explicit_devices_are_kept(shim: ModuleType, tiny_qwen: Path, device: object) -> None:
    from transformers import pipeline

    shim.apply()
    pipe = pipeline("text-generation", model=str(tiny_qwen), device=device)
    expected = torch.device("cpu") if device == -1 else torch.device(device)
    assert pipe.device == expected


def test_a_model_already_on_a_core_stays_there(shim: ModuleType, tiny_qwen: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map={"": 1})
    assert pipeline("text-generation", model=model, tokenizer=tokenizer).device == torch.device(
        "cpu"
    )  # the gap: moved off

    shim.apply()
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map={"": 1})
    pipe = pipeline("text-generation", model=model, tokenizer=tokenizer)
    assert pipe.device == torch.device("neuron", 1)
    assert {p.device for p in model.parameters()} == {torch.device("neuron", 1)}


def test_a_model_split_by_accelerate_keeps_its_map(shim: ModuleType, tiny_qwen: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    split = {"model.embed_tokens": 1, "model.rotary_emb": 1, "model.layers": 1, "model.norm": 0, "lm_head": 0}
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map=split)
    assert pipeline("text-generation", model=model, tokenizer=tokenizer).device == torch.device("cpu")  # the gap

    shim.apply()
    pipe = pipeline("text-generation", model=model, tokenizer=tokenizer)
    assert pipe.device == torch.device("neuron", 1)  # upstream's choice: the map's first device
    assert model.lm_head.weight.device == torch.device("neuron", 0)


def test_disabled_by_name_and_reverted(shim: ModuleType, tiny_qwen: Path) -> None:
    from transformers import pipeline
    from transformers.pipelines.base import Pipeline

    original = Pipeline.__init__
    shim.apply(skip=["pipeline_device"])
    assert shim.status()["pipeline_device"].state == "disabled"
    assert pipeline("text-generation", model=str(tiny_qwen)).device == torch.device("cpu")
    shim.revert()
    shim.apply()
    assert Pipeline.__init__ is not original
    shim.revert()
    assert Pipeline.__init__ is original
    assert pipeline("text-generation", model=str(tiny_qwen)).device == torch.device("cpu")
