"""``attention``: flash attention requests become sdpa on Neuron, wherever they arrive; flex attention is kept
(TorchNeuron 2.34 runs it) and compiled with ``backend="neuron"``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest
import torch
from datasets import Dataset

from neuroncompat.testing import sentences


def _forward(model: object) -> torch.Tensor:
    return model(torch.ones(1, 8, dtype=torch.long, device="neuron")).logits  # type: ignore[operator]


@contextmanager
def _dynamo_default_inductor() -> Iterator[None]:
    """A runtime whose auto-selection of the ``neuron`` backend does not reach the call (Dynamo's default
    left at inductor): what TorchNeuron documents does not say it reaches a compile made before any tensor."""
    from torch._dynamo.backends import registry

    runtime_default = registry.get_default_backend()
    registry.set_default_backend(None)
    try:
        yield
    finally:
        registry.set_default_backend(runtime_default)


def _flex_call() -> torch.Tensor:
    """transformers' compiled flex attention on ``neuron`` tensors, as one attention layer calls it."""
    from torch.nn.attention.flex_attention import create_block_mask
    from transformers.integrations.flex_attention import compile_friendly_flex_attention

    q, k, v = (torch.randn(1, 2, 128, 16, device="neuron") for _ in range(3))
    mask = create_block_mask(lambda b, h, i, j: i >= j, 1, 1, 128, 128, device="neuron")
    return compile_friendly_flex_attention(q, k, v, training=True, block_mask=mask)  # type: ignore[return-value]


def test_gaps_without_the_patch(shim: ModuleType, tiny_qwen: Path) -> None:
    from torch._inductor.exc import InductorError
    from transformers import AutoModelForCausalLM

    for implementation in ("flash_attention_2", "flash_attention_3"):
        with pytest.raises(ImportError, match="has been toggled on, but it cannot be used"):
            AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", attn_implementation=implementation)
    with _dynamo_default_inductor(), pytest.raises(InductorError):
        _flex_call()


@pytest.mark.parametrize("implementation", ["flash_attention_2", "flash_attention_3"])
def test_from_pretrained_keyword_becomes_sdpa(
    shim: ModuleType, tiny_qwen: Path, implementation: str, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers import AutoModelForCausalLM

    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", attn_implementation=implementation)
    assert model.config._attn_implementation == "sdpa"
    assert _forward(model).device.type == "neuron"
    assert f'[attention] attn_implementation="{implementation}" -> "sdpa" for Qwen3ForCausalLM' in caplog.text


def test_flex_attention_compiles_for_neuron_without_auto_selection(
    shim: ModuleType, neuron: object, caplog: pytest.LogCaptureFixture
) -> None:
    """Right whether or not TorchNeuron's auto-selection reaches transformers' compile (``compile`` patch off, so
    only this patch acts)."""
    shim.apply(skip=["compile"])
    with _dynamo_default_inductor(), caplog.at_level(logging.INFO, logger="neuroncompat"):
        out = _flex_call()
    assert out.device.type == "neuron"
    assert len(neuron.compiles()) == 1  # type: ignore[attr-defined]
    assert "[attention] flex_attention compiled with backend='neuron'" in caplog.text


def test_flex_attention_model_trains_as_on_the_cpu(
    shim: ModuleType, tiny_qwen: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Forward and one training step of a flex-attention model on the device equal the CPU's.

    The CPU reference uses ``sdpa``: PyTorch refuses flex attention's backward on the CPU ("FlexAttention does
    not support backward on CPU"). Flex's dense math and the CPU's SDPA kernel may sum in different orders, so
    equality is asked to float32 rounding, rtol 1e-5 (a few ulps of a loss near 4, over 2 layers); on this tiny
    model (torch 2.13 CPU) both losses came out bit for bit equal.
    """
    from transformers import AutoModelForCausalLM

    shim.apply()
    ids = torch.randint(0, 30, (2, 8), generator=torch.Generator().manual_seed(0))

    def losses(device: str, implementation: str) -> tuple[object, list[float]]:
        model = AutoModelForCausalLM.from_pretrained(
            tiny_qwen, device_map=device, attn_implementation=implementation, dtype=torch.float32
        )
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        inputs = ids.to(device)
        first = model(inputs, labels=inputs).loss
        first.backward()
        optimizer.step()
        second = model(inputs, labels=inputs).loss
        return model, [first.item(), second.item()]

    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        model, on_device = losses("neuron", "flex_attention")
    _, on_cpu = losses("cpu", "sdpa")
    assert model.config._attn_implementation == "flex_attention"  # type: ignore[attr-defined]
    assert {p.device.type for p in model.parameters()} == {"neuron"}  # type: ignore[attr-defined]
    assert '-> "sdpa"' not in caplog.text
    torch.testing.assert_close(on_device, on_cpu, rtol=1e-5, atol=0)
    assert on_device[1] < on_device[0]


def test_config_and_from_config(shim: ModuleType, tiny_qwen: Path) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    shim.apply()
    config = AutoConfig.from_pretrained(tiny_qwen, attn_implementation="flash_attention_2")
    assert AutoModelForCausalLM.from_pretrained(tiny_qwen, config=config).config._attn_implementation == "sdpa"
    config = AutoConfig.from_pretrained(tiny_qwen)
    config._attn_implementation = "flash_attention_2"
    assert AutoModelForCausalLM.from_config(config).config._attn_implementation == "sdpa"
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen)
    model.set_attn_implementation("flash_attention_2")
    assert model.config._attn_implementation == "sdpa"


def test_composes_with_device_map(shim: ModuleType, tiny_qwen: Path, caplog: pytest.LogCaptureFixture) -> None:
    from transformers import AutoModelForCausalLM

    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        model = AutoModelForCausalLM.from_pretrained(
            tiny_qwen, device_map="auto", attn_implementation="flash_attention_2"
        )
    assert {p.device for p in model.parameters()} == {torch.device("neuron", 0)}
    assert model.config._attn_implementation == "sdpa"
    assert "[device_map]" in caplog.text and "[attention]" in caplog.text


def test_trl_model_init_kwargs(shim: ModuleType, tiny_qwen: Path, tmp_path: Path) -> None:
    from trl import SFTConfig, SFTTrainer

    shim.apply()
    args = SFTConfig(
        output_dir=str(tmp_path),
        report_to=[],
        model_init_kwargs={"attn_implementation": "flash_attention_2"},
    )
    trainer = SFTTrainer(model=str(tiny_qwen), args=args, train_dataset=Dataset.from_dict({"text": sentences(4)}))
    assert trainer.model.config._attn_implementation == "sdpa"
    assert {p.device.type for p in trainer.model.parameters()} == {"neuron"}


@pytest.mark.parametrize("implementation", ["eager", "sdpa", "flex_attention"])
def test_implementations_that_work_are_kept(shim: ModuleType, tiny_qwen: Path, implementation: str) -> None:
    from transformers import AutoModelForCausalLM

    shim.apply()
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", attn_implementation=implementation)
    assert model.config._attn_implementation == implementation


def test_disabled_by_name_and_reverted(shim: ModuleType, tiny_qwen: Path) -> None:
    from transformers import AutoModelForCausalLM, PreTrainedModel

    original = PreTrainedModel._check_and_adjust_attn_implementation
    shim.apply(skip=["attention"])
    assert shim.status()["attention"].state == "disabled"
    with pytest.raises(ImportError):
        AutoModelForCausalLM.from_pretrained(tiny_qwen, attn_implementation="flash_attention_2")
    shim.revert()
    shim.apply()
    assert shim.status()["attention"].state == "applied"
    shim.revert()
    assert PreTrainedModel._check_and_adjust_attn_implementation is original
