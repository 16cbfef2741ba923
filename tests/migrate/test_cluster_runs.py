"""Migrated tensor-parallel and SLURM fixtures run distributed (2 ranks) on the simulated Neuron device.

- `generate_num_cores.expected.py` (Optimum `num_cores=2` inference): whole on one core under `python`,
  sharded over 2 processes under torchrun, the CPU's greedy tokens both ways.

- `tp_generate.expected.py` under `torchrun --nproc_per_node 2`: each rank holds its shard of the
  weights as a DTensor on `neuron:{rank}`, and the greedy tokens equal the unsharded CPU model's.
- `local_two_process.expected.slurm`: its `srun torchrun ...` line, run here as `torchrun` with
  2 processes and a localhost rendezvous (what srun starts on one node), trains 2 steps.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="runs migrated scripts on the simulator: needs torch")

from fixture_runs import assert_trained_on_cpu, losses  # noqa: E402  (imported after the torch skip)
from launch import _checked, free_port, torchrun  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

# Wraps a script: records each model `from_pretrained` returns; at exit prints, per rank, whether
# the first attention projection is a DTensor, where it lives, and its local and full shapes.
TP_PROBE = """
import atexit, json, os, sys
from torch.distributed.tensor import DTensor
from transformers import PreTrainedModel
from neuroncompat.runner import run

_models = []
_load = PreTrainedModel.from_pretrained.__func__


def _record(cls, *args, **kwargs):
    model = _load(cls, *args, **kwargs)
    _models.append(model)
    return model


def _report():
    for model in _models:
        weight = model.model.layers[0].self_attn.q_proj.weight
        local = weight.to_local() if isinstance(weight, DTensor) else weight
        print("RANK_TP " + json.dumps({"rank": int(os.environ["RANK"]), "dtensor": isinstance(weight, DTensor),
                                       "device": str(local.device), "local": list(local.shape),
                                       "full": list(weight.shape)}))


PreTrainedModel.from_pretrained = classmethod(_record)
atexit.register(_report)
run(sys.argv[1:])
"""


def _results(stdout: str, tag: str) -> dict[int, dict]:
    decoder = json.JSONDecoder()
    rows = [decoder.raw_decode(stdout, m.end())[0] for m in re.finditer(re.escape(tag) + " ", stdout)]
    return {row["rank"]: row for row in rows}


@pytest.mark.slow
@pytest.mark.ranks
def test_migrated_tensor_parallel_generate_shards_as_dtensors_and_matches_cpu(run_workdir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    (run_workdir / "tp_probe.py").write_text(TP_PROBE)
    prompt = " ".join((run_workdir / "train.txt").read_text().split()[:5])
    out = run_workdir / "tp_tokens.txt"
    script = FIXTURES / "cuda" / "tp_generate.expected.py"
    result = torchrun(
        "tp_probe.py",
        [
            str(script),
            "--model_name_or_path",
            "model",
            "--prompt",
            prompt,
            "--max_new_tokens",
            "6",
            "--output_file",
            str(out),
        ],
        run_workdir,
    )
    ranks = _results(result.stdout, "RANK_TP")
    assert set(ranks) == {0, 1}
    for rank, row in ranks.items():
        assert row["dtensor"] and row["device"] == f"neuron:{rank}", row
        assert row["local"][0] * 2 == row["full"][0], "q_proj is split over the two ranks"
    tokenizer = AutoTokenizer.from_pretrained(run_workdir / "model")
    inputs = tokenizer(prompt, return_tensors="pt")
    reference = AutoModelForCausalLM.from_pretrained(run_workdir / "model").generate(
        **inputs, max_new_tokens=6, do_sample=False
    )
    expected = reference[0][inputs["input_ids"].shape[1] :].tolist()
    assert [int(t) for t in out.read_text().split()] == expected


@pytest.mark.slow
@pytest.mark.ranks
def test_migrated_num_cores_inference_runs_however_it_is_launched(run_workdir: Path) -> None:
    """Issue 27: Optimum's `num_cores=2` export migrated to TP=2 started only under torchrun (`python` failed
    to initialise torch.distributed). Now plain `python` runs it whole on one core, and torchrun with 2
    processes shards it over them; both give the CPU's greedy tokens."""
    from fixture_runs import run_script
    from transformers import AutoModelForCausalLM, AutoTokenizer

    (run_workdir / "tp_probe.py").write_text(TP_PROBE)
    prompt = " ".join((run_workdir / "train.txt").read_text().split()[:5])
    script = FIXTURES / "optimum" / "generate_num_cores.expected.py"
    tokenizer = AutoTokenizer.from_pretrained(run_workdir / "model")
    inputs = tokenizer(prompt, return_tensors="pt")
    reference = AutoModelForCausalLM.from_pretrained(run_workdir / "model").generate(
        **inputs, max_new_tokens=6, do_sample=False
    )
    expected = reference[0][inputs["input_ids"].shape[1] :].tolist()

    def arguments(out: Path) -> list[str]:
        return ["--model", "model", "--prompt", prompt, "--max_new_tokens", "6", "--output_file", str(out)]

    one = run_workdir / "num_cores_python.txt"
    run_script(script, arguments(one), run_workdir, on_neuron=True)
    assert [int(t) for t in one.read_text().split()] == expected

    two = run_workdir / "num_cores_torchrun.txt"
    result = torchrun("tp_probe.py", [str(script), *arguments(two)], run_workdir)
    ranks = _results(result.stdout, "RANK_TP")
    assert set(ranks) == {0, 1}
    for row in ranks.values():
        assert row["dtensor"] and row["local"][0] * 2 == row["full"][0], row
    assert [int(t) for t in two.read_text().split()] == expected


def _srun_torchrun_arguments(slurm: Path) -> list[str]:
    """The arguments after `srun torchrun` in a batch script, continuation lines joined."""
    text = slurm.read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.lstrip().startswith("srun torchrun"))
    return shlex.split(line)[2:]


@pytest.mark.slow
@pytest.mark.ranks
def test_migrated_slurm_launch_line_trains_two_steps_on_two_ranks(run_workdir: Path) -> None:
    out = run_workdir / "slurm-out"
    arguments = _srun_torchrun_arguments(FIXTURES / "slurm" / "local_two_process.expected.slurm")
    assert arguments[arguments.index("--nproc_per_node") + 1] == "2"
    variables = {"$MODEL": "model", "$DATA": "train.txt", "$OUT": str(out)}
    arguments = [variables.get(a, a) for a in arguments]
    # the repository's trainer_clm.py, migrated too
    arguments = [str(FIXTURES / "cuda" / "trainer_clm.expected.py") if a == "trainer_clm.py" else a for a in arguments]
    port = str(free_port())
    arguments = [a.replace("localhost:0", f"localhost:{port}") for a in arguments]
    result = _checked([sys.executable, "-m", "torch.distributed.run", *arguments], run_workdir)
    found = losses(result.stdout)
    assert found and all(math.isfinite(x) for x in found)
    assert_trained_on_cpu(out, run_workdir / "model")
