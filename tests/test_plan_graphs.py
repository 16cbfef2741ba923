"""``neuroncompat plan MODEL --graphs`` (issue 42): the graphs Neuron would compile for the planned step under
``torch.compile(model)``, counted by the dry run's ``neuron`` backend while Dynamo traces the step on fake inputs,
and checked against the same backend's count when the same step runs for real on the simulated device.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from plan_cli import SCHEMA, llama_config, run_plan

from neuroncompat.plan.settings import PlanSettings

SHAPE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 128,
}


def test_graphs_of_a_parallel_layout_are_refused_by_name(tmp_path: Path) -> None:
    for option in (["--tp", "2"], ["--layouts"]):
        refused = run_plan(str(llama_config(tmp_path, **SHAPE)), "--graphs", *option)
        assert refused.exit_code == 2, refused.output
        assert "--graphs counts the graphs of a step on one core" in refused.output


@pytest.mark.slow  # Dynamo's first compile in a process: several CPU-seconds
def test_a_plain_training_step_compiles_to_one_graph_and_is_reported(tmp_path: Path) -> None:
    result = run_plan(str(llama_config(tmp_path, **SHAPE)), "--seq-len", "32", "--graphs", "--format", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    jsonschema.validate(plan, SCHEMA)
    (graph,) = plan["graphs"]["graphs"]
    assert plan["graphs"]["count"] == 1 and graph["ops"] > 0
    assert graph["code"].startswith("transformers/models/llama/modeling_llama.py:"), graph["code"]
    without = json.loads(run_plan(str(tmp_path), "--seq-len", "32", "--format", "json").stdout)
    assert without["per_core"] == plan["per_core"], "the memory figures are the eager step's, with or without"
    assert "graphs" not in without


@pytest.mark.slow  # two compiles of the step, one of them run for real on the simulated device
def test_the_graphs_counted_on_fake_inputs_are_those_the_real_step_compiles(neuron: object) -> None:
    """With gradient checkpointing the compiled forward breaks; the plan must count what the device run does."""
    import torch
    from transformers import LlamaConfig

    from neuroncompat.plan import graphs, step
    from neuroncompat.simulator import compile_backend

    config = LlamaConfig(**SHAPE)
    settings = PlanSettings(seq_len=32, gradient_checkpointing=True)
    planned = graphs.count(config, settings)

    torch._dynamo.reset()
    before = len(compile_backend.compiles())
    model = step.build_model(config, settings, "neuron:0")
    ids = step.input_ids(config, settings, "neuron:0")
    compiled = torch.compile(model, backend="neuron")
    step.train_step(compiled, step.build_optimizer(model, settings), ids, settings, lambda phase: None)
    real = compile_backend.compiles()[before:]
    torch._dynamo.reset()
    assert planned["count"] == len(real) > 1, (planned, [graph.code for graph in real])
    assert [graph["ops"] for graph in planned["graphs"]] == [graph.ops for graph in real]
