"""``neuroncompat plan -- python train.py ARGS`` (issue 42): the user's own script, its model built from its config
on fake tensors, traced through its first training step and planned as ``plan MODEL`` plans the same step.

The scripts are tests/plan_scripts/ (a plain loop and a Trainer script, as users write them) and a few written
here to fail one way each; the model is a tiny Llama config in a tmp dir (no weights: the plan reads none).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import Result
from helpers import REPO
from plan_cli import SCHEMA, SMALL, llama_config, run_plan

from neuroncompat.plan.report import render_markdown, render_text

SCRIPTS = REPO / "tests" / "plan_scripts"


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return llama_config(tmp_path / "model", **SMALL)


def _json(result: Result) -> dict:
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    jsonschema.validate(plan, SCHEMA)
    return plan


def _script(folder: Path, body: str) -> Path:
    """A script in ``folder`` that loads the model at ``argv[1]`` and then runs ``body``."""
    path = folder / "train.py"
    path.write_text(
        "import sys\nimport torch\nfrom transformers import AutoModelForCausalLM\n\n"
        "model = AutoModelForCausalLM.from_pretrained(sys.argv[1])\nmodel.train()\n" + body
    )
    return path


@pytest.mark.slow  # the script's step and plan MODEL's, each traced
def test_a_plain_loop_is_planned_as_plan_model_plans_the_same_step(small: Path) -> None:
    loop = ["python", str(SCRIPTS / "loop.py"), str(small), "2", "128", "--autocast"]
    script = _json(run_plan("--format", "json", "--", *loop))
    model = _json(
        run_plan(str(small), "--batch-size", "2", "--seq-len", "128", "--autocast", "bf16", "--format", "json")
    )
    assert script["settings"] == model["settings"], "the batch, dtype, autocast and optimizer the script used"
    assert script["parameter_count"] == model["parameter_count"]
    assert list(script["per_core"]["phase_peaks"]) == ["forward", "backward", "optimizer"]
    for phase, peak in model["per_core"]["phase_peaks"].items():
        # the same step; the script keeps its 4-byte loss alive into the optimizer step, plan MODEL drops it
        assert abs(script["per_core"]["phase_peaks"][phase] - peak) <= 8, phase
    assert script["per_core"]["phase"] == "optimizer" and script["fits"] and script["exit_code"] == 0
    assert script["script"]["stopped_at"] == "loop.py:28", "stopped at the optimizer step, before loss.item()"
    assert script["script"]["models"] == [str(small)] and script["config"] == str(small / "config.json")
    text = render_text(script)
    assert "script: stopped after its first optimizer step, at loop.py:28" in text
    assert "step: train, adamw; batch 2 x 128 tokens; fp32, autocast bf16" in text


@pytest.mark.slow  # Trainer and accelerate set-up, a few CPU-seconds
def test_a_trainer_script_is_planned_as_plan_model_plans_the_same_step(small: Path, tmp_path: Path) -> None:
    argv = ["python", str(SCRIPTS / "trainer.py"), str(small), "2", "128", str(tmp_path / "out")]
    script = _json(run_plan("--format", "json", "--", *argv))
    model = _json(run_plan(str(small), "--batch-size", "2", "--seq-len", "128", "--format", "json"))
    assert script["settings"] == model["settings"]
    labels = 2 * 128 * 8  # the collated labels are a tensor of their own; plan MODEL's are the input ids
    for phase in ("forward", "backward"):
        extra = script["per_core"]["phase_peaks"][phase] - model["per_core"]["phase_peaks"][phase] - labels
        assert 0 <= extra <= 16, f"{phase}: the same step, and a scalar or two of Trainer's own (a token count)"
    # Trainer puts the norms in a parameter group of their own (no weight decay): foreach AdamW's temporary is
    # made per group, so the optimizer step's peak is lower by at most the norms' share
    peak = model["per_core"]["peak_bytes"]
    assert 0 <= peak - script["per_core"]["peak_bytes"] <= 0.001 * peak
    assert script["script"]["stopped_at"] == "trainer.py:29"
    (answered,) = script["script"]["answered_reads"]
    assert answered["site"].startswith("transformers/trainer.py:") and "nan or inf" in answered["why"]


@pytest.mark.slow  # two micro-batches traced
def test_gradient_accumulation_traces_every_micro_batch_up_to_the_optimizer_step(small: Path, tmp_path: Path) -> None:
    body = (
        "model.to(torch.bfloat16)\nopt = torch.optim.SGD(model.parameters())\nfor micro in range(2):\n"
        "    ids = torch.randint(0, 1000, (2, 64))\n    model(input_ids=ids, labels=ids).loss.backward()\nopt.step()\n"
    )
    plan = _json(run_plan("--format", "json", "--", "python", str(_script(tmp_path, body)), str(small)))
    peaks, parameters = plan["per_core"]["phase_peaks"], plan["parameter_count"] * 2
    assert plan["settings"]["optimizer"] == "sgd" and plan["settings"]["dtype"] == "bf16", "the script's .to(bf16)"
    assert plan["per_core"]["categories"]["parameters"] == parameters
    # the second micro-batch's forward runs while the first one's gradients are held
    assert peaks["backward"] > peaks["forward"] + parameters


@pytest.mark.slow  # the script's generation and plan MODEL's, each traced
def test_a_generate_script_is_planned_as_plan_model_plans_a_generation(small: Path, tmp_path: Path) -> None:
    body = (
        "model.eval()\nids = torch.randint(0, 1000, (1, 16))\n"
        "out = model.generate(ids, max_new_tokens=8, do_sample=False, cache_implementation='static')\n"
        "print(out.tolist())\n"
    )
    script = _json(run_plan("--format", "json", "--", "python", str(_script(tmp_path, body)), str(small)))
    model = _json(
        run_plan(str(small), "--task", "generate", "--seq-len", "16", "--max-new-tokens", "8", "--format", "json")
    )
    assert script["settings"] == model["settings"]
    assert list(script["per_core"]["phase_peaks"]) == ["prefill", "decode"]
    # generate's static cache holds max_length - 1 positions (the last token is never cached), plan MODEL's all
    position = model["per_core"]["kv_cache_bytes"] // 24
    assert script["per_core"]["kv_cache_bytes"] == model["per_core"]["kv_cache_bytes"] - position
    assert script["per_core"]["peak_bytes"] == pytest.approx(model["per_core"]["peak_bytes"], rel=1e-3)
    assert script["script"]["stopped_at"] == "train.py:9", "inside generate, before the tokens are read"
    (answered,) = script["script"]["answered_reads"]
    assert answered["site"].startswith("transformers/generation/utils.py:") and "finished" in answered["why"]
    assert "script: stopped after the first decode step, at train.py:9" in render_text(script)


def test_a_peft_lora_script_is_planned_as_plan_model_lora_plans_the_same_step(tmp_path: Path) -> None:
    """peft's adapters on the script's fake model are fake too: the step is plan MODEL's ``--lora-r 8`` step."""
    tiny = llama_config(tmp_path, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, vocab_size=256)  # fmt: skip
    script = _json(run_plan("--format", "json", "--", "python", str(SCRIPTS / "lora.py"), str(tiny), "2", "32"))
    model = _json(run_plan(str(tiny), "--batch-size", "2", "--seq-len", "32", "--lora-r", "8", "--lora-target",
                           "q_proj", "--lora-target", "v_proj", "--format", "json"))  # fmt: skip
    assert script["settings"] == model["settings"], "the rank and targets of the script's LoraConfig"
    assert script["per_core"]["categories"]["parameters"] == model["per_core"]["categories"]["parameters"]
    for phase, peak in model["per_core"]["phase_peaks"].items():
        assert abs(script["per_core"]["phase_peaks"][phase] - peak) <= 8, phase  # the script's loss, kept alive
    assert "train, LoRA r=8, fp32; batch 2 x 32 tokens" in render_markdown(script)


def test_a_real_parameter_added_after_loading_exits_2_naming_it(small: Path, tmp_path: Path) -> None:
    body = (
        "model.probe = torch.nn.Linear(4, 4)\nids = torch.randint(0, 1000, (1, 8))\nmodel(input_ids=ids, labels=ids)\n"
    )
    result = run_plan("--", "python", str(_script(tmp_path, body)), str(small))
    assert result.exit_code == 2, result.output
    assert "train.py:9: the model's parameter probe.weight is a real tensor" in result.output


def test_a_value_that_decides_the_scripts_control_flow_exits_2_naming_the_line(small: Path) -> None:
    result = run_plan("--", "python", str(SCRIPTS / "loop.py"), str(small), "2", "16", "--read-loss")
    assert result.exit_code == 2, result.output
    assert "loop.py:25: reads a tensor's value" in result.output


def test_reading_the_weights_exits_2_naming_the_line(small: Path, tmp_path: Path) -> None:
    script = _script(tmp_path, "print(model.lm_head.weight.abs().max().item())\n")
    result = run_plan("--", "python", str(script), str(small))
    assert result.exit_code == 2, result.output
    assert "train.py:7: reads a value of the fake model's tensors" in result.output


def test_an_error_the_script_raises_exits_2_naming_its_line(small: Path, tmp_path: Path) -> None:
    script = _script(tmp_path, "raise ConnectionError('cannot reach the hub to download the dataset')\n")
    result = run_plan("--", "python", str(script), str(small))
    assert result.exit_code == 2, result.output
    assert "train.py:7: the script raised ConnectionError: cannot reach the hub" in result.output


def test_a_script_that_ends_or_trains_another_model_exits_2(small: Path, tmp_path: Path) -> None:
    ended = run_plan("--", "python", str(_script(tmp_path, "model(torch.zeros(1, 4, dtype=torch.long))\n")), str(small))
    assert ended.exit_code == 2 and "ended without a training step" in ended.output
    other = _script(
        tmp_path,
        "real = torch.nn.Linear(4, 4)\nopt = torch.optim.SGD(real.parameters())\n"
        "real(torch.ones(4)).sum().backward()\nopt.step()\n",
    )
    result = run_plan("--", "python", str(other), str(small))
    assert result.exit_code == 2, result.output
    assert "train.py:9: backward() was called before any model built by from_pretrained" in result.output


def test_a_command_the_plan_cannot_run_or_an_option_the_script_decides_exits_2(tmp_path: Path) -> None:
    launcher = run_plan("--", "torchrun", "--nproc-per-node", "2", "train.py")
    assert launcher.exit_code == 2 and "plan runs one Python process" in launcher.output
    missing = run_plan("--", "python", str(tmp_path / "absent.py"))
    assert missing.exit_code == 2 and "absent.py: no such script" in missing.output
    option = run_plan("--seq-len", "512", "--", "python", str(SCRIPTS / "loop.py"))
    assert option.exit_code == 2 and "--seq-len: the script's own step decides it" in option.output
