"""``quantization``: bitsandbytes requests load unquantized on Neuron, with a loud memory warning."""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType

import pytest
import torch
from datasets import Dataset
from helpers import REPO

from neuroncompat.patches.quantization import _bitsandbytes_bits
from neuroncompat.testing import sentences


def _four_bit() -> object:
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)


def test_gap_bitsandbytes_cannot_load(shim: ModuleType, tiny_qwen: Path) -> None:
    from transformers import AutoModelForCausalLM

    with pytest.raises(ImportError, match="bitsandbytes"):
        AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", quantization_config=_four_bit())


def test_loads_unquantized_with_a_warning(shim: ModuleType, tiny_qwen: Path, caplog: pytest.LogCaptureFixture) -> None:
    from transformers import AutoModelForCausalLM

    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        model = AutoModelForCausalLM.from_pretrained(
            tiny_qwen, device_map="neuron", quantization_config=_four_bit(), dtype=torch.bfloat16
        )
    assert {(p.device, p.dtype) for p in model.parameters()} == {(torch.device("neuron", 0), torch.bfloat16)}
    assert getattr(model, "hf_quantizer", None) is None and getattr(model.config, "quantization_config", None) is None
    [record] = [r for r in caplog.records if "[quantization]" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert (
        "bitsandbytes 4-bit quantization dropped" in record.getMessage()
        and "about 4x the memory" in record.getMessage()
    )
    # issue 41: a QLoRA script's own isinstance(m, bnb.nn.Linear4bit) scan then finds nothing to adapt
    assert "a script that looks for bnb.nn.Linear4bit modules" in record.getMessage()
    assert "PEFT stops with 'No `target_modules` passed'" in record.getMessage()
    assert (
        "Pass target_modules explicitly" in record.getMessage() and "neuron-migrate (rule NM209" in record.getMessage()
    )


def test_a_scan_for_quantized_layers_finds_none_and_peft_stops_as_the_warning_says(
    shim: ModuleType, tiny_qwen: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What the warning promises, on the real model and PEFT: no layer is bitsandbytes' (none is anything but
    torch.nn.Linear), an empty target list stops PEFT with the quoted error, explicit targets adapt."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    shim.apply()
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        model = AutoModelForCausalLM.from_pretrained(
            tiny_qwen, device_map="neuron", quantization_config=BitsAndBytesConfig(load_in_8bit=True)
        )
    assert "bnb.nn.Linear8bitLt modules" in caplog.text
    linear = {type(m) for m in model.modules() if "Linear" in type(m).__name__}
    assert linear == {torch.nn.Linear}, "nothing a bitsandbytes isinstance scan would find"
    with pytest.raises(ValueError, match="No `target_modules` passed"):
        get_peft_model(model, LoraConfig(r=2, target_modules=[]))
    adapted = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    assert any("lora_A" in name for name, _ in adapted.named_parameters())


def test_trl_qlora_recipe_trains(shim: ModuleType, tiny_qwen: Path, tmp_path: Path) -> None:
    from peft import LoraConfig
    from trl import SFTConfig, SFTTrainer

    shim.apply()
    args = SFTConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        report_to=[],
        save_strategy="no",
        model_init_kwargs={"dtype": "bfloat16"},
    )
    trainer = SFTTrainer(
        model=str(tiny_qwen),
        args=args,
        train_dataset=Dataset.from_dict({"text": sentences(4)}),
        quantization_config=_four_bit(),
        peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"]),
    )
    assert {p.device.type for p in trainer.model.parameters()} == {"neuron"}
    assert trainer.train().global_step == 1


def test_a_bare_load_in_4bit_keyword_is_transformers_error_as_everywhere(shim: ModuleType, tiny_qwen: Path) -> None:
    """Issue 27: the README (now docs/shim.md) claimed ``load_in_4bit``/``load_in_8bit`` keywords were stripped; only a
    ``quantization_config`` is. transformers 5 passes the bare keyword on to the model, on any machine."""
    from transformers import AutoModelForCausalLM

    shim.apply()
    with pytest.raises(TypeError, match="unexpected keyword argument 'load_in_4bit'"):
        AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", load_in_4bit=True)
    readme = (REPO / "docs" / "shim.md").read_text(encoding="utf-8").splitlines()
    fix = next(line for line in readme if line.startswith("| `quantization` |")).split(" | ")[2]
    assert "`quantization_config`" in fix and "`from_pretrained(load_in_4bit=True)` is left alone" in fix


def test_which_configs_are_bitsandbytes() -> None:
    from transformers import BitsAndBytesConfig

    assert _bitsandbytes_bits(BitsAndBytesConfig(load_in_4bit=True)) == 4
    assert _bitsandbytes_bits(BitsAndBytesConfig(load_in_8bit=True)) == 8
    assert _bitsandbytes_bits({"load_in_8bit": True}) == 8
    assert _bitsandbytes_bits({"quant_method": "fp8"}) is None


def test_disabled_by_name_and_reverted(shim: ModuleType, tiny_qwen: Path) -> None:
    import transformers.modeling_utils as modeling_utils
    from transformers import AutoModelForCausalLM

    original = modeling_utils.get_hf_quantizer
    shim.apply(skip=["quantization"])
    assert shim.status()["quantization"].state == "disabled"
    with pytest.raises(ImportError, match="bitsandbytes"):
        AutoModelForCausalLM.from_pretrained(tiny_qwen, quantization_config=_four_bit())
    shim.revert()
    shim.apply()
    assert modeling_utils.get_hf_quantizer is not original
    shim.revert()
    assert modeling_utils.get_hf_quantizer is original
