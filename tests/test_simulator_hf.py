"""transformers, accelerate and TRL take their real Neuron code paths on the simulated device."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from datasets import Dataset

from neuroncompat.testing import sentences


def _prompts(tokenizer):
    tokenizer.padding_side = "left"
    return tokenizer(["the neuron core compiles a graph", "pad your batches"], return_tensors="pt", padding=True)


def test_static_cache_generate_on_neuron_matches_cpu(neuron: object, tiny_qwen: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", dtype=torch.bfloat16)
    assert {p.device for p in model.parameters()} == {torch.device("neuron", 0)}
    inputs = _prompts(tokenizer)  # left on CPU, as transformers >= 5.15 allows
    out = model.generate(**inputs, max_new_tokens=8, do_sample=False, cache_implementation="static")
    assert out.device.type == "cpu"

    reference = AutoModelForCausalLM.from_pretrained(tiny_qwen, dtype=torch.bfloat16)
    expected = reference.generate(**inputs, max_new_tokens=8, do_sample=False, cache_implementation="static")
    assert torch.equal(out, expected)
    # transformers auto-compiles static-cache generate on Neuron with the neuron backend.
    assert neuron.compiles(), "static-cache generate on neuron should compile the decode step"
    assert not any(g.rejected for g in neuron.compiles())


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_bf16_generation_and_loss_are_the_cpus_bit_for_bit(neuron: object, tiny_qwen: Path, attn: str) -> None:
    """Ops run the CPU's own kernels (SDPA included), so greedy tokens and losses equal the CPU's."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    inputs = _prompts(tokenizer)
    reference = AutoModelForCausalLM.from_pretrained(tiny_qwen, dtype=torch.bfloat16, attn_implementation=attn)
    model = AutoModelForCausalLM.from_pretrained(
        tiny_qwen, dtype=torch.bfloat16, attn_implementation=attn, device_map="neuron"
    )
    expected = reference.generate(**inputs, max_new_tokens=16, do_sample=False)
    out = model.generate(**inputs.to("neuron"), max_new_tokens=16, do_sample=False)
    assert torch.equal(out.cpu(), expected)
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    loss = model(**inputs.to("neuron"), labels=labels.to("neuron")).loss
    assert torch.equal(loss.cpu(), reference(**inputs.to("cpu"), labels=labels).loss)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_bf16_training_losses_are_the_cpus_bit_for_bit(neuron: object, tiny_qwen: Path, compiled: bool) -> None:
    """Four AdamW steps of a bf16 SDPA model: every loss and the final weights equal the CPU's, eager and
    compiled (the neuron backend runs the graph it records with the device's kernels, which are the CPU's),
    with AdamW's defaults (``foreach`` on the device, the for-loop on the CPU). The CPU reference runs
    eagerly: inductor would fuse, the neuron backend does not."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    batch = tokenizer(sentences(4), return_tensors="pt", padding="max_length", max_length=24, truncation=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)

    def train(device: str) -> tuple[list[float], dict[str, torch.Tensor]]:
        model = AutoModelForCausalLM.from_pretrained(
            tiny_qwen, dtype=torch.bfloat16, attn_implementation="sdpa", device_map=device
        )
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        forward = torch.compile(model, backend="neuron") if compiled and device == "neuron" else model
        losses = []
        for _ in range(4):
            loss = forward(**batch.to(device), labels=labels.to(device)).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
        return losses, {k: v.cpu() for k, v in model.state_dict().items()}

    (cpu_losses, cpu_weights), (losses, weights) = train("cpu"), train("neuron")
    assert losses == cpu_losses
    assert all(torch.equal(weights[k], cpu_weights[k]) for k in cpu_weights)
    if compiled:
        assert neuron.compiles() and not any(g.rejected for g in neuron.compiles())


def test_gap_device_map_auto_lands_on_cpu(neuron: object, tiny_qwen: Path) -> None:
    """The seeds' gap, reproduced as on hardware (the shim's device_map patch fixes it)."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import is_torch_neuron_available

    assert is_torch_neuron_available()
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="auto")
    assert {p.device.type for p in model.parameters()} == {"cpu"}


def test_gap_trl_7664_static_cache_dtype_error(neuron: object, tiny_qwen: Path) -> None:
    """An fp32 model generating with a static cache under bf16 autocast fails as TRL #7664 reports."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron")
    with (
        torch.autocast("neuron", dtype=torch.bfloat16),
        pytest.raises(RuntimeError, match=r"index_copy_\(\): self and source expected to have the same dtype"),
    ):
        model.generate(
            **_prompts(tokenizer),
            max_new_tokens=4,
            do_sample=False,
            cache_implementation="static",
            disable_compile=True,
        )


def _lm_dataset(tokenizer, count: int = 16) -> Dataset:
    return Dataset.from_dict({"text": sentences(count)}).map(
        lambda batch: tokenizer(batch["text"]), batched=True, remove_columns=["text"]
    )


def _assert_checkpoint_equals(model, path: Path) -> None:
    from transformers import AutoModelForCausalLM

    reloaded = AutoModelForCausalLM.from_pretrained(path)
    trained = model.state_dict()
    for name, value in reloaded.state_dict().items():
        assert value.device.type == "cpu"
        assert torch.equal(value, trained[name].cpu()), name


@pytest.mark.slow
def test_trainer_trains_and_saves_on_neuron(neuron: object, tiny_qwen: Path, tmp_path: Path) -> None:
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainingArguments,
    )

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=3,
        per_device_train_batch_size=4,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        bf16=True,
    )
    assert args.device == torch.device("neuron", 0)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen)
    before = model.lm_head.weight.detach().clone()
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=_lm_dataset(tokenizer),
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
    )
    result = trainer.train()
    assert result.global_step == 3 and torch.isfinite(torch.tensor(result.training_loss))
    assert {p.device for p in model.parameters()} == {torch.device("neuron", 0)}
    assert not torch.equal(model.lm_head.weight.cpu(), before)
    trainer.save_model(tmp_path / "final")
    _assert_checkpoint_equals(model, tmp_path / "final")


@pytest.mark.slow
def test_sft_trainer_trains_and_saves_on_neuron(neuron: object, tiny_qwen: Path, tmp_path: Path) -> None:
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(
        output_dir=str(tmp_path),
        max_steps=3,
        per_device_train_batch_size=2,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
    )
    assert args.device.type == "neuron"
    trainer = SFTTrainer(model=str(tiny_qwen), args=args, train_dataset=Dataset.from_dict({"text": sentences(12)}))
    assert trainer.args.pad_to_multiple_of == 128, "TRL pads to multiples of 128 on Neuron"
    result = trainer.train()
    assert result.global_step == 3 and torch.isfinite(torch.tensor(result.training_loss))
    assert {p.device.type for p in trainer.model.parameters()} == {"neuron"}
    trainer.save_model(tmp_path / "final")
    _assert_checkpoint_equals(trainer.model, tmp_path / "final")


def _batch_shapes(trainer, steps: int) -> set[tuple[int, ...]]:
    shapes = set()
    for step, batch in enumerate(trainer.get_train_dataloader()):
        if step == steps:
            break
        shapes.add(tuple(batch["input_ids"].shape))
    return shapes


@pytest.mark.slow
@pytest.mark.parametrize("pad_to_multiple_of", [None, 128])
def test_trainer_compile_records_one_graph_per_padded_shape(
    neuron: object, tiny_qwen: Path, tmp_path: Path, pad_to_multiple_of: int | None
) -> None:
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainingArguments,
    )

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=5,
        per_device_train_batch_size=2,
        report_to=[],
        save_strategy="no",
        torch_compile=True,
        dataloader_drop_last=True,
        seed=7,
    )
    assert args.torch_compile_backend == "neuron"
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=False, pad_to_multiple_of=pad_to_multiple_of)
    trainer = Trainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_qwen),
        args=args,
        train_dataset=_lm_dataset(tokenizer),
        data_collator=collator,
    )
    trainer.train()
    shapes = _batch_shapes(trainer, 5)
    graphs = neuron.compiles()
    batch_inputs = {
        spec.shape for g in graphs for spec in g.inputs if spec.dtype == "int64" and spec.shape and len(spec.shape) == 2
    }
    assert batch_inputs == shapes
    assert len(graphs) == len(shapes), [g.inputs for g in graphs]
    if pad_to_multiple_of == 128:
        assert shapes == {(2, 128)}
    else:
        assert len(shapes) > 1
    assert not any(g.rejected for g in graphs)
