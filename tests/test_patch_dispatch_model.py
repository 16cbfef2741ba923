"""``dispatch_model``: accelerate's single-integer-device dispatch moves the model onto the core."""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType

import pytest
import torch


def _devices(model: torch.nn.Module) -> set[torch.device]:
    return {t.device for t in [*model.parameters(), *model.buffers()]}


def _model(path: Path) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path)


def test_gap_the_model_stays_on_cpu(shim: ModuleType, tiny_qwen: Path) -> None:
    import accelerate

    model = accelerate.dispatch_model(_model(tiny_qwen), device_map={"": 0})
    assert _devices(model) == {torch.device("cpu")}
    assert model.hf_device_map == {"": 0}


@pytest.mark.parametrize("index", [0, 1])
def test_dispatch_moves_the_model(
    shim: ModuleType, tiny_qwen: Path, index: int, caplog: pytest.LogCaptureFixture
) -> None:
    import accelerate

    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        model = accelerate.dispatch_model(_model(tiny_qwen), device_map={"": index})
    assert _devices(model) == {torch.device("neuron", index)}
    assert model.hf_device_map == {"": index}
    logits = model(torch.ones(1, 4, dtype=torch.long, device=f"neuron:{index}")).logits
    assert logits.device == torch.device("neuron", index)
    assert (
        f'[dispatch_model] dispatch_model(device_map={{"": {index}}}) -> model moved to neuron:{index}' in caplog.text
    )


def test_load_checkpoint_and_dispatch(shim: ModuleType, tiny_qwen: Path) -> None:
    from accelerate import init_empty_weights, load_checkpoint_and_dispatch
    from transformers import AutoConfig, AutoModelForCausalLM

    shim.apply()
    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(tiny_qwen))
    model = load_checkpoint_and_dispatch(model, str(tiny_qwen), device_map={"": 0})
    assert _devices(model) == {torch.device("neuron", 0)}
    reference = _model(tiny_qwen)
    assert torch.equal(model.lm_head.weight.cpu(), reference.lm_head.weight)


@pytest.mark.parametrize("device", ["cpu", "neuron:1", torch.device("neuron", 1)])
def test_explicit_devices_are_upstreams(shim: ModuleType, tiny_qwen: Path, device: object) -> None:
    import accelerate

    shim.apply()
    model = accelerate.dispatch_model(_model(tiny_qwen), device_map={"": device})
    assert _devices(model) == {torch.device(device)}


def test_disabled_by_name_and_reverted(shim: ModuleType, tiny_qwen: Path) -> None:
    import accelerate
    import accelerate.big_modeling

    original = accelerate.dispatch_model
    shim.apply(skip=["dispatch_model"])
    assert shim.status()["dispatch_model"].state == "disabled"
    assert _devices(accelerate.dispatch_model(_model(tiny_qwen), device_map={"": 0})) == {torch.device("cpu")}
    shim.revert()
    shim.apply()
    assert accelerate.dispatch_model is not original
    shim.revert()
    assert accelerate.dispatch_model is original and accelerate.big_modeling.dispatch_model is original
