"""``attention``: flash/flex attention requests become sdpa on Neuron, wherever they arrive."""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType

import pytest
import torch
from datasets import Dataset

from neuroncompat.testing import sentences


def _forward(model: object) -> torch.Tensor:
    return model(torch.ones(1, 8, dtype=torch.long, device="neuron")).logits  # type: ignore[operator]


def test_gaps_without_the_patch(shim: ModuleType, tiny_qwen: Path) -> None:
    from torch._inductor.exc import InductorError
    from transformers import AutoModelForCausalLM

    for implementation in ("flash_attention_2", "flash_attention_3"):
        with pytest.raises(ImportError, match="has been toggled on, but it cannot be used"):
            AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", attn_implementation=implementation)
    flex = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", attn_implementation="flex_attention")
    with pytest.raises(InductorError):
        _forward(flex)


@pytest.mark.parametrize("implementation", ["flash_attention_2", "flash_attention_3", "flex_attention"])
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


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
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
