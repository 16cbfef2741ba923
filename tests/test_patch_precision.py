"""``precision``: fp16 becomes bf16 and tf32 is dropped on Neuron, where both raise today."""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType

import pytest
import torch
from datasets import Dataset

from neuroncompat.testing import sentences


def _fresh_accelerate_state() -> None:
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)


def _neuron_matmul_dtype() -> torch.dtype:
    x = torch.ones(2, 2, device="neuron")
    return (x @ x).dtype


def test_gaps_without_the_patch(shim: ModuleType, tiny_qwen: Path, tmp_path: Path) -> None:
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path), fp16=True, report_to=[])
    with pytest.raises(ValueError, match="fp16 mixed precision requires a device .* \\(not 'neuron'\\)"):
        Trainer(model=AutoModelForCausalLM.from_pretrained(tiny_qwen), args=args)
    _fresh_accelerate_state()
    with pytest.raises(ValueError, match="fp16 mixed precision requires a device"):
        Accelerator(mixed_precision="fp16")
    with pytest.raises(ValueError, match="--tf32 requires Ampere"):
        TrainingArguments(output_dir=str(tmp_path), tf32=True, report_to=[])
    with torch.autocast("neuron", dtype=torch.float16):
        assert _neuron_matmul_dtype() == torch.float16


def test_fp16_trainer_trains_in_bf16(
    shim: ModuleType, tiny_qwen: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainingArguments,
    )

    shim.apply()
    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    dataset = Dataset.from_dict({"text": sentences(4)}).map(
        lambda b: tokenizer(b["text"]), batched=True, remove_columns=["text"]
    )
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        args = TrainingArguments(
            output_dir=str(tmp_path),
            fp16=True,
            tf32=True,
            max_steps=1,
            per_device_train_batch_size=2,
            report_to=[],
            save_strategy="no",
        )
    assert (args.fp16, args.bf16, args.tf32) == (False, True, None)
    trainer = Trainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_qwen),
        args=args,
        train_dataset=dataset,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
    )
    assert trainer.accelerator.mixed_precision == "bf16"
    assert trainer.train().global_step == 1
    assert "[precision] TrainingArguments(fp16=True) -> bf16=True" in caplog.text
    assert "[precision] TrainingArguments(tf32=True) dropped" in caplog.text
    assert all(r.levelno == logging.WARNING for r in caplog.records if "[precision]" in r.getMessage())


def test_trl_config_fp16_and_tf32(shim: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from trl import SFTConfig

    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        args = SFTConfig(output_dir=str(tmp_path), fp16=True, tf32=True, report_to=[])
    assert (args.fp16, args.bf16, args.tf32) == (False, True, None)
    assert "[precision] SFTConfig(fp16=True) -> bf16=True" in caplog.text


def test_accelerator_fp16_argument_and_environment(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from accelerate import Accelerator

    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        assert Accelerator(mixed_precision="fp16").mixed_precision == "bf16"
        _fresh_accelerate_state()
        monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp16")
        accelerator = Accelerator()
    assert accelerator.mixed_precision == "bf16"
    assert accelerator.device.type == "neuron"
    assert '[precision] Accelerator mixed_precision="fp16" -> "bf16"' in caplog.text
    assert '[precision] Accelerator ACCELERATE_MIXED_PRECISION="fp16" -> "bf16"' in caplog.text


def test_autocast_fp16_on_neuron_becomes_bf16(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        with torch.autocast("neuron", dtype=torch.float16):
            assert _neuron_matmul_dtype() == torch.bfloat16
        with torch.autocast("neuron"):  # PyTorch's default autocast dtype for a PrivateUse1 device is float16
            assert _neuron_matmul_dtype() == torch.bfloat16
    assert '[precision] torch.autocast("neuron", dtype=torch.float16) -> torch.bfloat16' in caplog.text


def test_values_that_work_are_kept(shim: ModuleType, tmp_path: Path) -> None:
    from accelerate import Accelerator
    from transformers import TrainingArguments

    shim.apply()
    args = TrainingArguments(output_dir=str(tmp_path), bf16=True, tf32=False, report_to=[])
    assert (args.fp16, args.bf16, args.tf32) == (False, True, False)
    on_cpu = TrainingArguments(output_dir=str(tmp_path), fp16=True, use_cpu=True, report_to=[])
    assert on_cpu.fp16 is True  # the user chose the CPU, where fp16 is accelerate's business
    assert Accelerator(mixed_precision="no").mixed_precision == "no"
    with torch.autocast("cpu", dtype=torch.float16):
        assert torch.get_autocast_dtype("cpu") == torch.float16
    with torch.autocast("neuron", dtype=torch.bfloat16):
        assert _neuron_matmul_dtype() == torch.bfloat16


def test_disabled_by_name_and_reverted(shim: ModuleType, tmp_path: Path) -> None:
    from transformers import TrainingArguments

    originals = (TrainingArguments.__post_init__, torch.autocast.__init__)
    shim.apply(skip=["precision"])
    assert shim.status()["precision"].state == "disabled"
    assert TrainingArguments(output_dir=str(tmp_path), fp16=True, report_to=[]).fp16 is True
    shim.revert()
    shim.apply()
    assert shim.status()["precision"].state == "applied"
    shim.revert()
    assert (TrainingArguments.__post_init__, torch.autocast.__init__) == originals
    with pytest.raises(ValueError, match="--tf32 requires Ampere"):
        TrainingArguments(output_dir=str(tmp_path), tf32=True, report_to=[])
