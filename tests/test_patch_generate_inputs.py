"""``generate_inputs``: prompts moved onto Neuron are generated from the CPU; the output comes back."""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode


class _GrowingTokens(TorchDispatchMode):
    """Records where ``torch.cat`` grows ``[batch, tokens]`` tensors (input_ids, attention_mask)."""

    def __init__(self) -> None:
        super().__init__()
        self.devices: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if func is torch.ops.aten.cat.default and args[0][0].dim() == 2:
            self.devices.append(args[0][0].device.type)
        return func(*args, **(kwargs or {}))


@pytest.fixture
def model_and_prompts(tiny_qwen: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron")
    prompts = tokenizer(["the neuron core compiles", "pad"], return_tensors="pt", padding=True)
    return model, prompts


def _generate(model: Any, recorder: _GrowingTokens, *args: Any, **kwargs: Any) -> Any:
    with recorder:
        return model.generate(*args, max_new_tokens=4, do_sample=False, **kwargs)


def test_gap_tokens_grow_on_neuron(shim: ModuleType, model_and_prompts: tuple[Any, Any]) -> None:
    model, prompts = model_and_prompts
    recorder = _GrowingTokens()
    _generate(model, recorder, **prompts.to(model.device))
    assert set(recorder.devices) == {"neuron"} and len(recorder.devices) >= 4


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
def test_inputs_stay_on_cpu_and_output_returns(
    shim: ModuleType, model_and_prompts: tuple[Any, Any], caplog: pytest.LogCaptureFixture
) -> None:
    model, prompts = model_and_prompts
    expected = model.generate(**prompts, max_new_tokens=4, do_sample=False)
    shim.apply()
    recorder = _GrowingTokens()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        out = _generate(model, recorder, **prompts.to(model.device))
    assert set(recorder.devices) == {"cpu"}
    assert out.device == torch.device("neuron", 0)
    assert torch.equal(out.cpu(), expected)
    assert "[generate_inputs] generate inputs on neuron:0 are kept on the CPU" in caplog.text

    positional = _generate(
        model,
        _GrowingTokens(),
        prompts["input_ids"].to(model.device),
        attention_mask=prompts["attention_mask"].to(model.device),
    )
    assert positional.device == torch.device("neuron", 0)
    dict_out = _generate(model, _GrowingTokens(), **prompts.to(model.device), return_dict_in_generate=True)
    assert dict_out.sequences.device == torch.device("neuron", 0)


def test_cpu_inputs_and_cpu_models_are_untouched(
    shim: ModuleType, model_and_prompts: tuple[Any, Any], tiny_qwen: Path
) -> None:
    from transformers import AutoModelForCausalLM

    model, prompts = model_and_prompts
    shim.apply()
    assert _generate(model, _GrowingTokens(), **prompts).device.type == "cpu"
    on_cpu = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="cpu")
    assert _generate(on_cpu, _GrowingTokens(), **prompts).device.type == "cpu"


def test_disabled_by_name_and_reverted(shim: ModuleType, model_and_prompts: tuple[Any, Any]) -> None:
    from transformers.generation.utils import GenerationMixin

    model, prompts = model_and_prompts
    original = GenerationMixin.generate
    shim.apply(skip=["generate_inputs"])
    assert shim.status()["generate_inputs"].state == "disabled"
    recorder = _GrowingTokens()
    _generate(model, recorder, **prompts.to(model.device))
    assert set(recorder.devices) == {"neuron"}
    shim.revert()
    shim.apply()
    assert GenerationMixin.generate is not original
    shim.revert()
    assert GenerationMixin.generate is original
