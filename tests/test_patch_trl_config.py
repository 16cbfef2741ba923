"""``trl_config``: CUDA-only TRL settings are normalised on Neuron; a CUDA-style ``trl sft`` CLI trains."""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from datasets import Dataset

from neuroncompat.testing import sentences


def _dataset(count: int = 40) -> Dataset:
    return Dataset.from_dict({"text": sentences(count)})


def _config(tmp_path: Path, **kwargs: Any) -> Any:
    from trl import SFTConfig

    defaults = dict(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=4,
        report_to=[],
        save_strategy="no",
        max_length=64,
    )
    return SFTConfig(**{**defaults, **kwargs})


def _shapes(trainer: Any) -> set[tuple[int, ...]]:
    return {tuple(batch["input_ids"].shape) for batch in trainer.get_train_dataloader()}


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
def test_gaps_without_the_patch(
    shim: ModuleType, tiny_qwen: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from trl import SFTTrainer

    with pytest.raises(ImportError, match="bitsandbytes"):
        SFTTrainer(
            model=str(tiny_qwen), args=_config(tmp_path, optim="paged_adamw_8bit"), train_dataset=_dataset(8)
        ).train()
    with pytest.raises(ImportError, match="liger"):
        SFTTrainer(
            model=str(tiny_qwen), args=_config(tmp_path, use_liger_kernel=True), train_dataset=_dataset(8)
        ).train()
    with caplog.at_level(logging.WARNING, logger="neuroncompat.simulator"):
        SFTTrainer(
            model=str(tiny_qwen),
            args=_config(tmp_path, torch_compile_mode="reduce-overhead"),
            train_dataset=_dataset(8),
        ).train()
    assert "mode='reduce-overhead'): the neuron backend supports only the default mode" in caplog.text
    packed = SFTTrainer(model=str(tiny_qwen), args=_config(tmp_path, packing=True), train_dataset=_dataset())
    shapes = _shapes(packed)
    assert {rows for rows, _ in shapes} == {1}, "padding-free: the batch of 4 is flattened into one row"
    assert len(shapes) > 1, "a row of changing length: one Neuron graph per length"


@pytest.mark.slow
def test_cuda_choices_are_normalised(
    shim: ModuleType, tiny_qwen: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from trl import SFTTrainer

    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        args = _config(
            tmp_path,
            optim="paged_adamw_8bit",
            use_liger_kernel=True,
            packing=True,
            torch_compile_mode="reduce-overhead",
            ddp_backend="nccl",
        )
    assert (args.optim, args.use_liger_kernel, args.packing, args.packing_strategy) == (
        "adamw_torch",
        False,
        True,
        "wrapped",
    )
    assert (args.dataloader_drop_last, args.torch_compile, args.torch_compile_mode, args.ddp_backend) == (
        True,
        True,
        None,
        None,
    )
    trainer = SFTTrainer(model=str(tiny_qwen), args=args, train_dataset=_dataset())
    assert _shapes(trainer) == {(4, 128)}, "fixed-length blocks, padded to 128, no short last batch"
    assert trainer.train().global_step == 1
    for expected in (
        '[trl_config] SFTConfig(optim="paged_adamw_8bit") -> "adamw_torch"',
        "[trl_config] SFTConfig(use_liger_kernel=True) -> False",
        '[trl_config] SFTConfig(packing=True, packing_strategy="bfd") -> "wrapped"',
        "[trl_config] SFTConfig(dataloader_drop_last=False) -> True",
        '[trl_config] SFTConfig(torch_compile_mode="reduce-overhead") -> None',
        '[trl_config] SFTConfig(ddp_backend="nccl") -> None',
    ):
        assert expected in caplog.text


def test_defaults_that_change_the_numbers_are_warned_once_with_how_to_keep_them(
    shim: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 41: "wrapped" packing gave other batches and losses (8.297 vs 8.247), logged at INFO nobody saw."""
    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        for _ in range(2):  # a script's config, then the trainer's copy of it: said once
            args = _config(tmp_path, packing=True)
    assert (args.packing_strategy, args.dataloader_drop_last) == ("wrapped", True)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    packing = [m for m in warned if 'packing_strategy="bfd") -> "wrapped"' in m]
    drop_last = [m for m in warned if "dataloader_drop_last=False) -> True" in m]
    assert len(packing) == len(drop_last) == 1
    assert (
        "the batches and the losses differ" in packing[0]
        and "To keep it: NEURONCOMPAT_DISABLE=trl_config" in packing[0]
    )
    assert "the steps and the losses differ" in drop_last[0] and "NEURONCOMPAT_DISABLE=trl_config" in drop_last[0]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        _config(tmp_path, packing=True, packing_strategy="wrapped", dataloader_drop_last=True)
    assert "[trl_config]" not in caplog.text, "the Neuron values set in the config: nothing to say"


def test_padding_free_is_turned_off(shim: ModuleType, tmp_path: Path) -> None:
    shim.apply()
    args = _config(tmp_path, padding_free=True, packing=True, packing_strategy="bfd_split")
    assert (args.padding_free, args.packing_strategy) == (False, "wrapped")


def test_values_that_work_are_kept(shim: ModuleType, tmp_path: Path) -> None:
    shim.apply()
    args = _config(
        tmp_path,
        optim="adafactor",
        packing=True,
        packing_strategy="wrapped",
        torch_compile=True,
        torch_compile_mode="default",
    )
    assert (args.optim, args.packing_strategy, args.torch_compile, args.torch_compile_mode) == (
        "adafactor",
        "wrapped",
        True,
        "default",
    )
    on_cpu = _config(tmp_path, optim="paged_adamw_8bit", use_cpu=True)
    assert (on_cpu.optim, on_cpu.dataloader_drop_last) == ("paged_adamw_8bit", False)


def test_disabled_by_name_and_reverted(shim: ModuleType, tmp_path: Path) -> None:
    from trl.trainer.base_config import _BaseConfig

    original = _BaseConfig.__post_init__
    shim.apply(skip=["trl_config"])
    assert shim.status()["trl_config"].state == "disabled"
    assert _config(tmp_path, optim="paged_adamw_8bit").optim == "paged_adamw_8bit"
    shim.revert()
    shim.apply()
    assert _BaseConfig.__post_init__ is not original
    shim.revert()
    assert _BaseConfig.__post_init__ is original


@pytest.mark.slow
def test_trl_sft_cli_with_cuda_flags_trains(
    shim: ModuleType, tiny_qwen: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``trl sft`` driven only by the flags a CUDA user passes trains on the simulated device."""
    import torch
    from trl.scripts.sft import main, make_parser

    data = tmp_path / "data"
    _dataset().to_json(data / "train.jsonl")
    argv = [
        "--model_name_or_path",
        str(tiny_qwen),
        "--dataset_name",
        str(data),
        "--output_dir",
        str(tmp_path / "out"),
        "--fp16",
        "--tf32",
        "True",
        "--attn_implementation",
        "flash_attention_2",
        "--optim",
        "paged_adamw_8bit",
        "--packing",
        "--max_length",
        "64",
        "--per_device_train_batch_size",
        "4",
        "--max_steps",
        "2",
        "--report_to",
        "none",
    ]
    with pytest.raises(ValueError, match="--tf32 requires"):
        make_parser().parse_args_and_config(args=argv)  # the gap, before the shim: the CLI cannot even build its config

    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        script_args, training_args, model_args, dataset_args = make_parser().parse_args_and_config(args=argv)
        main(script_args, training_args, model_args, dataset_args)
    assert (training_args.bf16, training_args.fp16, training_args.optim, training_args.packing_strategy) == (
        True,
        False,
        "adamw_torch",
        "wrapped",
    )
    from safetensors.torch import load_file

    before, after = load_file(tiny_qwen / "model.safetensors"), load_file(tmp_path / "out" / "model.safetensors")
    assert not torch.equal(before["lm_head.weight"], after["lm_head.weight"].to(before["lm_head.weight"].dtype)), (
        "it trained"
    )
    for expected in (
        "[precision] SFTConfig(fp16=True) -> bf16=True",
        "[precision] SFTConfig(tf32=True) dropped",
        '[attention] attn_implementation="flash_attention_2" -> "sdpa"',
        '[trl_config] SFTConfig(optim="paged_adamw_8bit") -> "adamw_torch"',
        '[trl_config] SFTConfig(packing=True, packing_strategy="bfd") -> "wrapped"',
        "[device_map]",
    ):
        assert expected in caplog.text, expected
