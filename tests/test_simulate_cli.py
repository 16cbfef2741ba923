"""`neuroncompat simulate -- python|torchrun ...`: the command runs through the shim on the
simulator in every process, its exit code comes back, and the report is per rank."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import run_python

from neuroncompat.simulate.launch import UnsupportedCommand, plan

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
PY = sys.executable  # a bare python or torchrun runs under the interpreter neuroncompat runs under


def _simulate(*args: str, cwd: Path) -> tuple[int, str, str]:
    result = run_python(f"from neuroncompat.cli import main; main({list(args)!r})", cwd=cwd)
    return result.returncode, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("command", "through_shim"),
    [
        ("python train.py --lr 1", f"{PY} -m neuroncompat train.py --lr 1"),
        ("python3 -u -W ignore train.py", f"{PY} -u -W ignore -m neuroncompat train.py"),
        ("python -m pkg.train --lr 1", f"{PY} -m neuroncompat -m pkg.train --lr 1"),
        ("python -m neuroncompat train.py", f"{PY} -m neuroncompat train.py"),
        ("/usr/bin/python3 train.py", "/usr/bin/python3 -m neuroncompat train.py"),
        (
            "torchrun --nproc_per_node=2 train.py --lr 1",
            f"{PY} -m torch.distributed.run --nproc_per_node=2 -m neuroncompat train.py --lr 1",
        ),
        (f"{TORCHRUN} train.py", f"{TORCHRUN} -m neuroncompat train.py"),
        (
            "torchrun --nnodes 1 -m pkg.train -x",
            f"{PY} -m torch.distributed.run --nnodes 1 -m neuroncompat -m pkg.train -x",
        ),
        (
            "python -m torch.distributed.run --nproc-per-node 2 train.py",
            f"{PY} -m torch.distributed.run --nproc-per-node 2 -m neuroncompat train.py",
        ),
        (
            "accelerate launch --num_processes 2 train.py --lr 1",
            f"{sys.executable} -m neuroncompat -m accelerate.commands.launch --num_processes 2 -m neuroncompat train.py --lr 1",
        ),
        (
            "python3 -m accelerate.commands.launch -m pkg.train",
            f"{PY} -m neuroncompat -m accelerate.commands.launch -m neuroncompat -m pkg.train",
        ),
    ],
)
def test_commands_run_the_script_through_the_shim(command: str, through_shim: str) -> None:
    assert " ".join(plan(tuple(command.split())).argv) == through_shim  # click passes a tuple


@pytest.mark.parametrize("command", ["python -c pass", "python", "bash train.sh", "torchrun --no-python train.sh"])
def test_commands_that_cannot_be_simulated_are_refused(command: str) -> None:
    with pytest.raises(UnsupportedCommand):
        plan(command.split())


FAILING_DECODE_LOOP = """\
import sys
import torch

embed = torch.nn.Embedding(16, 8).to("neuron")
for length in range(1, 7):  # a hand-written decode loop: one token longer per call
    embed(torch.zeros(1, length, dtype=torch.long, device="neuron"))
sys.exit(3)
"""


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
def test_failing_script_keeps_its_exit_code_and_still_gets_the_report(tmp_path: Path) -> None:
    (tmp_path / "decode.py").write_text(FAILING_DECODE_LOOP)
    code, out, err = _simulate("simulate", "--graph-cost", "30", "--", sys.executable, "decode.py", cwd=tmp_path)
    assert code == 3, err
    report = out[out.index("neuroncompat simulate:") :].splitlines()
    assert report[1] == "the script FAILED with exit code 3: the counts cover what ran before it stopped"
    assert report[-2] == (
        "verdict: the script FAILED (exit code 3) after 6 compilation(s), about 3 min on trn2 at 30 s each "
        "(--graph-cost)"
    )
    assert (
        report[-1]
        == f"next: fix the failure above, then dry-run again: neuroncompat simulate -- {sys.executable} decode.py"
    )
    assert (
        "rank 0: 0 compiled graph(s), 6 eager forward shape(s) -> about 3 min of Neuron compilation at 30 s each"
        in report
    )
    assert "    Embedding called at decode.py:6 (<module>): 6 shape(s) in 6 call(s)" in report
    assert "      args.0 int64[1,1]  x1" in report
    assert "  WARNING: 6 eager shapes at Embedding called at decode.py:6 (<module>)" in report
    assert "    args.0 dim 1: 6 sizes, 1..6, growing one at a time as a sequence does per generated token" in report
    assert any(line.startswith("    fix: use a static KV cache") for line in report)


PER_RANK_GENERATE = """\
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

rank = int(os.environ["LOCAL_RANK"])
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], padding_side="left")
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.bfloat16).to(f"neuron:{rank}")
assert next(model.parameters()).device == torch.device("neuron", rank)
prompts = ["the neuron core compiles", "pad your batches to a multiple of"][: rank + 1]
model.generate(**tokenizer(prompts, return_tensors="pt", padding=True), max_new_tokens=4, do_sample=False, cache_implementation="static")
"""


@pytest.mark.slow
@pytest.mark.ranks
def test_torchrun_two_ranks_get_a_report_each(tmp_path: Path, tiny_qwen: Path) -> None:
    (tmp_path / "generate.py").write_text(PER_RANK_GENERATE)
    code, _, err = _simulate(
        "simulate",
        "--format",
        "json",
        "-o",
        "report.json",
        "--",
        TORCHRUN,
        "--nproc_per_node=2",
        "generate.py",
        str(tiny_qwen),
        cwd=tmp_path,
    )
    assert code == 0, err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["schema"] == "neuroncompat.simulate/1" and report["exit_code"] == 0 and report["missing_ranks"] == []
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    for rank in report["ranks"]:
        batch = rank["rank"] + 1
        # transformers compiles the static-cache decode step on Neuron: one graph, at the user's generate line.
        (group,) = rank["compiled"]
        assert (
            group["site"].startswith("transformers/generation/utils.py:")
            and group["user"] == "generate.py:12 (<module>)"
        )
        # named by the model's forward, not by the decorator wrapping it in transformers
        code = group["code"]
        assert code.startswith("transformers/models/qwen3/modeling_qwen3.py:") and code.endswith(
            "(Qwen3ForCausalLM.forward)"
        )
        (graph,) = group["graphs"]
        expected = {"shape": [batch, 1], "dtype": "int64", "dynamic": False, "name": "input_ids", "parameter": False}
        assert graph["inputs"][0] == expected and not graph["rejected"]
        assert any(spec["parameter"] and spec["name"].startswith("self.model.") for spec in graph["inputs"])
        (prefill,) = rank["eager"]
        assert prefill["module"] == "Qwen3ForCausalLM" and prefill["calls"] == 1
        assert rank["compiled_graphs"] == 1 and rank["eager_shapes"] == 1 and rank["estimated_compile_seconds"] == 120
    assert report["estimated_compile_seconds"] == 120


ONE_RANK_FAILS = """\
import os
import time
from pathlib import Path

import torch

rank = int(os.environ["LOCAL_RANK"])
embed = torch.nn.Embedding(16, 8).to(f"neuron:{rank}")
embed(torch.zeros(1, 2 + rank, dtype=torch.long, device=f"neuron:{rank}"))
if rank == 0:
    Path("rank0.ready").touch()
    time.sleep(120)  # torchrun stops this rank when rank 1 fails
for _ in range(600):
    if Path("rank0.ready").exists():
        break
    time.sleep(0.1)
raise RuntimeError("rank 1 fails")
"""


@pytest.mark.slow
@pytest.mark.ranks
def test_when_one_torchrun_rank_fails_every_rank_is_still_reported(tmp_path: Path) -> None:
    (tmp_path / "fails.py").write_text(ONE_RANK_FAILS)
    code, _, err = _simulate(
        "simulate",
        "--format",
        "json",
        "-o",
        "report.json",
        "--",
        TORCHRUN,
        "--nproc_per_node=2",
        "fails.py",
        cwd=tmp_path,
    )
    assert code == 1 and "RuntimeError: rank 1 fails" in err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["exit_code"] == 1 and report["missing_ranks"] == []
    shapes = {r["rank"]: [s["inputs"][0]["shape"] for e in r["eager"] for s in e["shapes"]] for r in report["ranks"]}
    assert shapes == {0: [[1, 2]], 1: [[1, 3]]}


TENSORS_ONLY = """\
import torch

x = torch.ones(1024, device="neuron")
print((x * 2).sum().item())
"""


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
def test_a_script_that_only_computes_on_tensors_is_not_said_to_have_run_nothing(tmp_path: Path) -> None:
    """No module forward and no compile: the device still ran the script's ops, and the report says so."""
    from jsonschema import validate

    (tmp_path / "tensors.py").write_text(TENSORS_ONLY)
    code, out, err = _simulate("simulate", "--", sys.executable, "tensors.py", cwd=tmp_path)
    assert code == 0, err
    assert "nothing ran on the neuron device" not in out
    assert "no compiled graph and no module forward on the neuron device" in out and "allocation(s) on it" in out
    code, _, err = _simulate(
        "simulate", "--format", "json", "-o", "r.json", "--", sys.executable, "tensors.py", cwd=tmp_path
    )
    report = json.loads((tmp_path / "r.json").read_text())
    schema = json.loads((Path(__file__).resolve().parents[1] / "docs" / "simulate-report.schema.json").read_text())
    validate(report, schema)
    (rank,) = report["ranks"]
    assert rank["device_allocations"] >= 2 and rank["compiled_graphs"] == rank["eager_shapes"] == 0
