"""``vllm``: ``use_vllm=True`` on Neuron fails before the model loads, or falls back when asked."""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from datasets import Dataset


@pytest.fixture
def shim(shim: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The shared ``shim`` fixture, without an inherited ``NEURONCOMPAT_VLLM_FALLBACK``."""
    monkeypatch.delenv("NEURONCOMPAT_VLLM_FALLBACK", raising=False)
    return shim


def _reward(completions: list[str], **kwargs: Any) -> list[float]:
    return [float(len(c)) for c in completions]


def _grpo(tiny_qwen: Path, tmp_path: Path, **kwargs: Any) -> Any:
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=4,
        report_to=[],
        save_strategy="no",
        **kwargs,
    )
    prompts = Dataset.from_dict({"prompt": ["the neuron core", "pad your batches"]})
    return GRPOTrainer(model=str(tiny_qwen), reward_funcs=_reward, args=args, train_dataset=prompts)


def test_gap_use_vllm_fails_without_a_word_about_neuron(shim: ModuleType, tiny_qwen: Path, tmp_path: Path) -> None:
    with pytest.raises(ImportError, match="vLLM|vllm") as failure:
        _grpo(tiny_qwen, tmp_path, use_vllm=True)
    assert "neuron" not in str(failure.value).lower()


def test_use_vllm_fails_early_with_the_fix(shim: ModuleType, tiny_qwen: Path, tmp_path: Path) -> None:
    shim.apply()
    with pytest.raises(
        ValueError, match="GRPOTrainer: use_vllm=True cannot run on Neuron.*NEURONCOMPAT_VLLM_FALLBACK=1"
    ):
        _grpo(tiny_qwen, tmp_path, use_vllm=True)


@pytest.mark.slow
def test_fallback_generates_with_a_static_cache(
    shim: ModuleType, tiny_qwen: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("NEURONCOMPAT_VLLM_FALLBACK", "1")
    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        trainer = _grpo(tiny_qwen, tmp_path, use_vllm=True)
    assert (trainer.args.use_vllm, trainer.args.cache_implementation) == (False, "static")
    assert trainer.train().global_step == 1
    assert (
        '[vllm] GRPOTrainer: use_vllm=True -> False (NEURONCOMPAT_VLLM_FALLBACK=1): generating with transformers, cache_implementation="static"'
        in caplog.text
    )


def test_without_vllm_nothing_changes(shim: ModuleType, tiny_qwen: Path, tmp_path: Path) -> None:
    shim.apply()
    trainer = _grpo(tiny_qwen, tmp_path)
    assert (trainer.args.use_vllm, trainer.args.cache_implementation) == (False, None)


def test_disabled_by_name_and_reverted(shim: ModuleType, tiny_qwen: Path, tmp_path: Path) -> None:
    from trl import GRPOTrainer

    original = GRPOTrainer.__init__
    shim.apply(skip=["vllm"])
    assert shim.status()["vllm"].state == "disabled"
    with pytest.raises(ImportError):
        _grpo(tiny_qwen, tmp_path, use_vllm=True)
    shim.revert()
    shim.apply()
    assert GRPOTrainer.__init__ is not original
    shim.revert()
    assert GRPOTrainer.__init__ is original
