"""``neuroncompat plan MODEL`` (issue 42): a full-size step traced on fake tensors, its peak per NeuronCore by
category and phase, and a verdict with exit 0 fits / 1 does not fit / 2 input error.

Models are configs only (the plan never reads weights), so a config far too large for the machine plans in
seconds; the plan's accuracy against the simulated device's measured peak is tests/test_plan_accuracy.py.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import jsonschema
import pytest
from helpers import run_python
from plan_cli import SCHEMA, SMALL, llama_config, run_plan

GIB = 1 << 30


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return llama_config(tmp_path, **SMALL)


def test_a_training_plan_is_valid_json_with_every_category_and_exits_0_when_it_fits(small: Path) -> None:
    result = run_plan(str(small), "--batch-size", "2", "--seq-len", "128", "--format", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    jsonschema.validate(plan, SCHEMA)
    per_core = plan["per_core"]
    parameters = plan["parameter_count"] * 4  # fp32
    categories = per_core["categories"]
    assert categories["parameters"] == parameters
    assert per_core["phase"] == "optimizer", "AdamW's two states plus its foreach temporaries outweigh 2x128 tokens"
    assert categories["gradients"] == parameters and categories["optimizer_states"] >= 2 * parameters
    assert per_core["peak_bytes"] == sum(categories.values())
    assert list(per_core["phase_peaks"]) == ["forward", "backward", "optimizer"]
    assert plan["fits"] and plan["headroom_bytes"] == 24 * GIB - per_core["peak_bytes"]
    assert plan["largest_parameters"][0]["name"] in ("model.embed_tokens.weight", "lm_head.weight")
    logits = [t for t in plan["largest_tensors"] if t["shape"] == [2, 128, 1000]]
    assert logits and logits[0]["bytes"] == 2 * 128 * 1000 * 4, "the vocabulary-sized logits are among the largest"


def test_a_step_that_does_not_fit_exits_1_and_says_where_the_peak_falls(tmp_path: Path) -> None:
    """An 8B-wide model at 8 x 4096 tokens: the fp32 logits alone are 16 GiB, more than a trn1 core holds."""
    model = llama_config(
        tmp_path,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=1,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
    )
    result = run_plan(str(model), "--batch-size", "8", "--seq-len", "4096", "--instance", "trn1")
    assert result.exit_code == 1, result.output
    assert "does NOT fit in 16.00 GiB (trn1: NeuronCore-v2)" in result.output
    assert "_log_softmax 32768x128256 float32 in forward" in result.output


def test_gradient_checkpointing_lowers_the_forward_peak_and_sgd_keeps_no_state(small: Path) -> None:
    def plan(*extra: str) -> dict:
        result = run_plan(str(small), "--batch-size", "2", "--seq-len", "128", "--format", "json", *extra)
        assert result.exit_code == 0, result.output
        return json.loads(result.output)["per_core"]

    plain = plan("--optimizer", "sgd")
    checkpointed = plan("--optimizer", "sgd", "--gradient-checkpointing")
    assert checkpointed["phase_peaks"]["forward"] < plain["phase_peaks"]["forward"]
    assert plain["categories"]["optimizer_states"] == 0 and plain["phase"] != "optimizer"


def test_a_generation_plan_counts_the_static_cache(small: Path) -> None:
    """bf16, batch 2, 128 prompt + 32 new tokens: 4 layers x (K, V) x 2 KV heads x 160 positions x 64 dims."""
    result = run_plan(
        str(small), "--task", "generate", "--dtype", "bf16", "--batch-size", "2", "--seq-len", "128",
        "--max-new-tokens", "32", "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    jsonschema.validate(plan, SCHEMA)
    assert plan["per_core"]["kv_cache_bytes"] == 4 * 2 * 2 * 2 * 160 * 64 * 2
    assert list(plan["per_core"]["phase_peaks"]) == ["prefill", "decode"]
    assert plan["per_core"]["categories"]["gradients"] == 0


def test_a_config_that_is_not_json_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{\n  "model_type": "llama",\n  oops\n}\n')
    result = run_plan(str(tmp_path))
    assert result.exit_code == 2
    assert f"neuroncompat plan: {tmp_path / 'config.json'}:3:3: not valid JSON" in result.output


@pytest.mark.slow  # a fresh interpreter that imports torch and transformers
def test_an_input_error_in_json_is_a_json_error_document(tmp_path: Path) -> None:
    result = run_python(
        f"from neuroncompat.cli import main; main(['plan', {str(tmp_path / 'missing')!r}, '--format', 'json'])",
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    document = json.loads(result.stdout)
    assert document["tool"] == "neuroncompat plan" and document["exit_code"] == 2
    assert document["error"].startswith(f"{tmp_path / 'missing'}: not a directory, not a config.json")


def test_a_model_with_no_causal_lm_class_exits_2_naming_the_file(tmp_path: Path) -> None:
    from transformers import ViTConfig

    ViTConfig().save_pretrained(tmp_path)
    result = run_plan(str(tmp_path))
    assert result.exit_code == 2
    assert f"{tmp_path / 'config.json'}: model_type 'vit' has no causal-LM class" in result.output


def test_settings_out_of_range_are_refused_by_name() -> None:
    """The plan's API (the bench and the accuracy test build settings without the command line) checks as the
    command line does."""
    from neuroncompat.plan.settings import PlanInputError, PlanSettings

    with pytest.raises(PlanInputError, match="sequence length 0: must be at least 1"):
        PlanSettings(seq_len=0)
    with pytest.raises(PlanInputError, match="optimizer 'adafactor': expected one of adamw, sgd"):
        PlanSettings(optimizer="adafactor")


@pytest.mark.slow  # five plans of a sharded model
def test_fsdp_and_tp_shard_rank_0s_states_over_a_fake_process_group(tmp_path: Path) -> None:
    """FSDP2 over 2 ranks holds half the parameters, gradients and AdamW states; TP 2 shards each layer (the
    vocabulary-sized head by half); both together a quarter. Transformers' own plans, not a formula."""
    import torch.distributed as dist

    from neuroncompat.plan.report import render_text

    model = llama_config(tmp_path, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=1000)  # fmt: skip

    def plan(*layout: str) -> dict:
        result = run_plan(str(model), "--batch-size", "2", "--seq-len", "64", "--format", "json", *layout)
        assert result.exit_code == 0, result.output
        document = json.loads(result.output)
        jsonschema.validate(document, SCHEMA)
        return document

    one, fsdp, tp, both = plan(), plan("--fsdp", "2"), plan("--tp", "2"), plan("--tp", "2", "--fsdp", "2")
    assert not dist.is_initialized(), "the fake process group is destroyed when the plan ends"
    assert fsdp["layout"] == {"tp": 1, "fsdp": 2, "cores": 2} and both["layout"]["cores"] == 4
    full = one["per_core"]["categories"]["parameters"]
    assert fsdp["per_core"]["categories"]["parameters"] == full // 2
    assert fsdp["per_core"]["categories"]["all_gather"] > 0, "FSDP all-gathers each layer before it runs"
    assert one["per_core"]["peak_bytes"] > fsdp["per_core"]["peak_bytes"]
    head = {p["name"]: p["bytes"] for p in one["largest_parameters"]}["lm_head.weight"]
    assert {p["name"]: p["bytes"] for p in tp["largest_parameters"]}["lm_head.weight"] == head // 2
    assert both["per_core"]["categories"]["parameters"] < tp["per_core"]["categories"]["parameters"]
    assert "4 NeuronCores (TP 2 x FSDP 2), planned for rank 0" in render_text(both)


def test_a_layout_the_model_cannot_take_exits_2_with_the_reason(small: Path) -> None:
    result = run_plan(str(small), "--tp", "3")
    assert result.exit_code == 2
    assert "--tp 3: the config's num_attention_heads (4) is not a multiple of it" in result.output
    result = run_plan(str(small), "--task", "generate", "--fsdp", "2")
    assert result.exit_code == 2 and "a generation plan takes --tp only" in result.output


def test_the_layouts_are_every_tp_that_splits_whole_heads_by_core_count() -> None:
    from transformers import LlamaConfig

    from neuroncompat.plan.layouts import candidates

    config = LlamaConfig(num_attention_heads=32, num_key_value_heads=2)
    found = [(layout.tp, layout.fsdp) for layout in candidates(config, 8)]
    assert found == [(1, 1), (1, 2), (2, 1), (1, 4), (2, 2), (1, 8), (2, 4)], "TP 4 and 8 would split a KV head"


@pytest.mark.slow  # six traces of a 2-layer, 8B-wide model
def test_the_layout_table_stops_at_the_smallest_layout_that_fits_and_plans_it(tmp_path: Path) -> None:
    """Two 8B-wide layers in fp32 with AdamW: about 29 GiB on one core, so the smallest layout on a trn2 is two
    cores, FSDP before TP among equals; the table shows both columns and stops at two cores."""
    model = llama_config(tmp_path, hidden_size=4096, intermediate_size=14336, num_hidden_layers=2, num_attention_heads=32,
                    num_key_value_heads=8, vocab_size=128256)  # fmt: skip
    result = run_plan(str(model), "--seq-len", "64", "--layouts", "--format", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    jsonschema.validate(plan, SCHEMA)
    table = plan["layouts"]
    assert [(row["tp"], row["fsdp"]) for row in table["rows"]] == [(1, 1), (1, 2), (2, 1)]
    assert not table["rows"][0]["plain"]["fits"] and table["rows"][1]["plain"]["fits"]
    assert table["smallest"] == {"tp": 1, "fsdp": 2, "cores": 2} == plan["layout"]
    assert plan["per_core"]["peak_bytes"] == table["rows"][1]["plain"]["peak_bytes"]
    assert table["instance"] == "trn2.48xlarge" and table["traced_up_to_cores"] == 2
    from neuroncompat.plan.report import render_markdown

    assert "| 1 | 2 | 2 |" in render_markdown(plan), "the markdown lists each traced layout"
    result = run_plan(str(model), "--layouts", "--fsdp", "2")
    assert result.exit_code == 2 and "give it without --tp, --fsdp" in result.output


def test_lora_trains_adapters_over_a_frozen_base_with_real_peft(small: Path) -> None:
    """The base weights are parameters with no gradient and no AdamW state: the optimizer's states are two moments
    of the adapters alone (rank 8 on q_proj and v_proj, peft's default for a Llama)."""
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        result = run_plan(str(small), "--batch-size", "2", "--seq-len", "128", "--lora-r", "8", "--format", "json")
    assert result.exit_code == 0, result.output
    # peft's read of transformers' deprecated `is_gradient_checkpointing` would print above the verdict
    assert not [w for w in shown if "is_gradient_checkpointing" in str(w.message)]
    plan = json.loads(result.output)
    jsonschema.validate(plan, SCHEMA)
    assert plan["settings"]["lora_r"] == 8 and plan["settings"]["lora_targets"] == []
    base = 2_873_600 * 4  # the 4-layer model's fp32 weights
    adapters = 4 * (8 * 256 + 256 * 8 + 8 * 256 + 128 * 8) * 4  # per layer A (8 x 256) and B (out x 8) on q and v
    categories = plan["per_core"]["categories"]
    assert categories["parameters"] == base + adapters
    assert categories["optimizer_states"] <= 3 * adapters, "no state for the frozen base"
    assert plan["per_core"]["phase"] != "optimizer"
    from neuroncompat.plan.report import render_markdown

    markdown = render_markdown(plan)
    assert "train, LoRA r=8, fp32; batch 2 x 128 tokens" in markdown and "| at the peak | size |" in markdown
    result = run_plan(str(small), "--lora-r", "8", "--lora-target", "no_such_proj")
    assert result.exit_code == 2 and "peft cannot add LoRA adapters" in result.output


def test_lora_under_tp_and_fsdp_shards_the_adapters_with_their_base_layers(tmp_path: Path) -> None:
    """Rank 0 of TP 2 x FSDP 2: peft shards each adapter by its base layer's TP plan (a column-parallel q_proj's or
    v_proj's lora_B by rows, lora_A whole), then FSDP2 halves everything; the frozen base keeps no optimizer state."""
    model = llama_config(tmp_path, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=1000)  # fmt: skip

    def plan(*extra: str) -> dict:
        result = run_plan(str(model), "--batch-size", "2", "--seq-len", "64", "--tp", "2", "--fsdp", "2",
                          "--format", "json", *extra)  # fmt: skip
        assert result.exit_code == 0, result.output
        document = json.loads(result.output)
        jsonschema.validate(document, SCHEMA)
        return document["per_core"]["categories"]

    full, lora = plan(), plan("--lora-r", "8")
    # per layer: q_proj A 8 x 128 and B 64 x 8 (half of 128 rows), v_proj A 8 x 128 and B 32 x 8 (half of 64)
    adapters = 2 * (8 * 128 + 64 * 8 + 8 * 128 + 32 * 8) * 4 // 2  # fp32, halved by FSDP
    assert lora["parameters"] == full["parameters"] + adapters
    assert lora["gradients"] <= adapters and lora["optimizer_states"] <= 3 * adapters, "the base is frozen"
    assert lora["all_gather"] > 0, "FSDP all-gathers the frozen base layer by layer"


def test_the_layout_table_plans_lora_too(small: Path) -> None:
    """A step that fits one core in both columns: the table is that core alone, planned with the adapters."""
    result = run_plan(str(small), "--batch-size", "2", "--seq-len", "128", "--lora-r", "8", "--layouts",
                      "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    jsonschema.validate(plan, SCHEMA)
    assert [(row["tp"], row["fsdp"]) for row in plan["layouts"]["rows"]] == [(1, 1)]
    assert plan["per_core"]["peak_bytes"] == plan["layouts"]["rows"][0]["plain"]["peak_bytes"]
    assert (
        plan["per_core"]["categories"]["parameters"]
        == (2_873_600 * 4) + 4 * (8 * 256 + 256 * 8 + 8 * 256 + 128 * 8) * 4
    )


@pytest.mark.parametrize("layout", [(1, 1), (2, 2)], ids=["one-core", "tp2-fsdp2"])
def test_the_trace_keeps_memtrackers_own_step_peak(layout: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """The trace drops MemTracker's per-module peaks, most of its CPU time (neuroncompat/plan/trace.py); the step's
    peak, its split by category, each phase's peak and the largest tensors are what MemTracker computes with them."""
    import dataclasses
    import importlib

    from transformers import LlamaConfig

    from neuroncompat.plan.parallel import Layout
    from neuroncompat.plan.settings import PlanSettings

    traced = importlib.import_module("neuroncompat.plan.trace")
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=256)  # fmt: skip
    settings = PlanSettings(batch_size=2, seq_len=32, gradient_checkpointing=True)
    fast = traced.trace(config, settings, Layout(*layout))
    monkeypatch.setattr(traced, "_track_the_step_peak_only", lambda tracker: None)
    assert dataclasses.asdict(fast) == dataclasses.asdict(traced.trace(config, settings, Layout(*layout)))
