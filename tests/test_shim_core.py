"""The four core patches: each gap reproduced without the shim, then fixed with it."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import ModuleType

import pytest
import torch
from datasets import Dataset

import neuroncompat
from neuroncompat.testing import sentences


@pytest.fixture
def shim(shim: ModuleType) -> ModuleType:
    """The shared fixture, with every patch applied."""
    shim.apply()
    return shim


def _param_devices(model: torch.nn.Module) -> set[str]:
    return {str(p.device) for p in model.parameters()}


# -- device_map ------------------------------------------------------------------------------
def test_device_map_auto_resolves_to_the_local_core(
    shim: object, tiny_qwen: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers import AutoModelForCausalLM

    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        for strategy in ("auto", "balanced", "sequential"):
            assert _param_devices(AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map=strategy)) == {"neuron:0"}
    assert 'device_map="auto" -> {"": "neuron:0"}' in caplog.text


def test_device_map_follows_local_rank(shim: object, tiny_qwen: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("LOCAL_RANK", "1")
    assert _param_devices(AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="auto")) == {"neuron:1"}


def test_device_map_explicit_choices_are_kept(shim: object, tiny_qwen: Path) -> None:
    from transformers import AutoModelForCausalLM

    assert _param_devices(AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map={"": "cpu"})) == {"cpu"}
    assert _param_devices(AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron:1")) == {"neuron:1"}
    kept = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="auto", max_memory={"cpu": "1GiB"})
    assert _param_devices(kept) == {"cpu"}, "an explicit max_memory is the user's choice"


def test_device_map_opt_in_spreads_over_cores(shim: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoModelForCausalLM

    from neuroncompat.testing import build_causal_lm

    deeper = build_causal_lm(tmp_path, layers=8)  # big enough that "balanced" splits it
    monkeypatch.setenv("NEURONCOMPAT_DEVICE_MAP", "balanced")
    neuroncompat.revert()
    neuroncompat.apply()
    model = AutoModelForCausalLM.from_pretrained(deeper, device_map="balanced")
    assert set(model.hf_device_map.values()) == {0, 1}
    assert _param_devices(model) == {"neuron:0", "neuron:1"}


# -- async_load ------------------------------------------------------------------------------
def test_async_load_env(neuron: object, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import transformers.core_model_loading  # noqa: F401  (the loader that reads the variable, as from_pretrained does)

    monkeypatch.delenv("HF_DEACTIVATE_ASYNC_LOAD", raising=False)
    neuroncompat.revert()
    neuroncompat.apply()
    try:
        assert os.environ["HF_DEACTIVATE_ASYNC_LOAD"] == "1"
    finally:
        neuroncompat.revert()
    assert "HF_DEACTIVATE_ASYNC_LOAD" not in os.environ, "revert restores the environment"

    monkeypatch.setenv("HF_DEACTIVATE_ASYNC_LOAD", "0")
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        neuroncompat.apply()
        try:
            assert os.environ["HF_DEACTIVATE_ASYNC_LOAD"] == "0"
        finally:
            neuroncompat.revert()
    assert "HF_DEACTIVATE_ASYNC_LOAD=0 kept as you set it" in caplog.text


# -- static_cache ----------------------------------------------------------------------------
def _grpo(tmp_path: Path, model: str, **config: object):
    from trl import GRPOConfig, GRPOTrainer

    def reward_length(completions: list[str], **_: object) -> list[float]:
        return [len(c) / 10 for c in completions]

    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        cache_implementation="static",
        report_to=[],
        save_strategy="no",
        **config,
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=reward_length,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": sentences(8, 2, 6)}),
    )


def test_grpo_static_cache_fails_without_the_shim(neuron: object, tiny_qwen: Path, tmp_path: Path) -> None:
    trainer = _grpo(tmp_path, str(tiny_qwen))
    assert next(trainer.model.parameters()).dtype == torch.float32
    with pytest.raises(RuntimeError, match=r"index_copy_\(\): self and source expected to have the same dtype"):
        trainer.train()


def test_grpo_static_cache_trains_with_the_shim(
    shim: object, tiny_qwen: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        trainer = _grpo(tmp_path, str(tiny_qwen))
        result = trainer.train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))
    assert next(trainer.model.parameters()).dtype == torch.bfloat16
    changed = [r for r in caplog.records if 'model_init_kwargs["dtype"] = "bfloat16"' in r.getMessage()]
    assert [r.levelname for r in changed] == ["WARNING"], "a default that changes the losses is said where users see it"
    assert 'To keep float32: model_init_kwargs={"dtype": "float32"}' in changed[0].getMessage()


def test_grpo_explicit_dtype_is_kept(shim: object, tiny_qwen: Path, tmp_path: Path) -> None:
    trainer = _grpo(tmp_path, str(tiny_qwen), model_init_kwargs={"dtype": "float32"})
    assert trainer.args.model_init_kwargs == {"dtype": "float32"}
    # The cache patch alone still keeps K and V consistent for the fp32 model under autocast.
    assert trainer.train().global_step == 2


@pytest.mark.parametrize("chunked", [False, True])
def test_fp32_model_static_cache_under_autocast(shim: object, tiny_qwen: Path, chunked: bool) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer, StaticCache

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron")
    inputs = tokenizer(["the neuron core compiles a graph for every new shape"], return_tensors="pt")
    cache = StaticCache(config=model.config, max_cache_len=64)
    extra = {"prefill_chunk_size": 4} if chunked else {}
    with torch.autocast("neuron", dtype=torch.bfloat16):
        out = model.generate(
            **inputs, max_new_tokens=4, do_sample=False, past_key_values=cache, disable_compile=True, **extra
        )
    assert out.shape[1] == inputs["input_ids"].shape[1] + 4
    assert {layer.keys.dtype for layer in cache.layers} == {torch.bfloat16}
    assert {layer.values.dtype for layer in cache.layers} == {torch.bfloat16}


# -- dynamic_shapes --------------------------------------------------------------------------
def _three_shapes(neuron: object) -> list[bool]:
    import torch._dynamo

    torch._dynamo.reset()
    neuron.reset_compiles()
    compiled = torch.compile(torch.nn.Linear(4, 4).to("neuron"), backend="neuron")
    for rows in (4, 8, 16):
        compiled(torch.randn(rows, 4, device="neuron"))
    return [g.dynamic for g in neuron.compiles()]


def test_dynamic_shapes_off(neuron: object, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._dynamo.config

    monkeypatch.delenv("TORCH_DYNAMO_AUTOMATIC_DYNAMIC_SHAPES", raising=False)
    assert _three_shapes(neuron) == [False, True], "without the shim the second shape goes dynamic"
    neuroncompat.revert()
    neuroncompat.apply()
    try:
        assert _three_shapes(neuron) == [False, False, False]
        assert os.environ["TORCH_DYNAMO_AUTOMATIC_DYNAMIC_SHAPES"] == "0"
    finally:
        neuroncompat.revert()
    assert torch._dynamo.config.automatic_dynamic_shapes is True


def _graphs_for_shapes(neuron: object, count: int) -> int:
    """Compile one function on ``count`` distinct static shapes; how many graphs Neuron got."""
    import torch._dynamo

    torch._dynamo.reset()
    neuron.reset_compiles()
    compiled = torch.compile(lambda x: x * 2, backend="neuron", dynamic=False)
    for rows in range(1, count + 1):
        compiled(torch.ones(rows, device="neuron"))
    return len(neuron.compiles())


def test_recompile_limit_raised_for_static_buckets(neuron: object, caplog: pytest.LogCaptureFixture) -> None:
    import torch._dynamo.config

    neuroncompat.revert()
    assert _graphs_for_shapes(neuron, 12) == 8, (
        "without the shim Dynamo stops compiling after 8 shapes, then runs eagerly"
    )
    try:
        with caplog.at_level(logging.INFO, logger="neuroncompat"):
            neuroncompat.apply()
        assert _graphs_for_shapes(neuron, 12) == 12
    finally:
        neuroncompat.revert()
    assert "[dynamic_shapes] torch._dynamo.config.recompile_limit 8 -> 64" in caplog.text
    assert torch._dynamo.config.recompile_limit == 8


def test_compile_config_dynamic_true_warns(shim: object, caplog: pytest.LogCaptureFixture) -> None:
    from transformers import CompileConfig

    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        CompileConfig(dynamic=True)
    assert "CompileConfig(dynamic=True): the Neuron backend rejects dynamic graphs" in caplog.text


# -- switches --------------------------------------------------------------------------------
def test_disable_by_name_and_revert(neuron: object, tiny_qwen: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoModelForCausalLM, PreTrainedModel

    original = PreTrainedModel.__dict__["from_pretrained"]
    monkeypatch.setenv("NEURONCOMPAT_DISABLE", "device_map")
    neuroncompat.revert()
    states = neuroncompat.apply(skip=["static_cache"])
    try:
        assert states["device_map"].state == "disabled" and "NEURONCOMPAT_DISABLE" in states["device_map"].detail
        assert states["static_cache"].state == "disabled"
        assert states["dynamic_shapes"].state == "applied"
        assert _param_devices(AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="auto")) == {"cpu"}
    finally:
        neuroncompat.revert()
    monkeypatch.delenv("NEURONCOMPAT_DISABLE")
    neuroncompat.apply()
    assert PreTrainedModel.__dict__["from_pretrained"] is not original
    neuroncompat.revert()
    assert PreTrainedModel.__dict__["from_pretrained"] is original


def test_unknown_patch_id_is_an_error(neuron: object) -> None:
    neuroncompat.revert()
    with pytest.raises(ValueError, match="unknown neuroncompat patch id"):
        neuroncompat.apply(skip=["device_mapp"])
