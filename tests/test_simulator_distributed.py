"""Ported scripts run distributed on the simulator: torchrun, accelerate launch, DDP, FSDP2, TP.

Every test launches real processes the way a user does on a trn2 host, with the shim and the
simulator on (``-m neuroncompat`` / ``NEURONCOMPAT_SIMULATE=1``): each rank holds its tensors
on ``neuron:{LOCAL_RANK}`` and the ``neuron`` process group moves real data between ranks.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fixture_runs import assert_adapter_trained_on_cpu, assert_trained_on_cpu, losses
from launch import WEIGHTS_PROBE, accelerate_launch, free_port, rank_logs, simulated_env, torchrun

pytestmark = [pytest.mark.slow, pytest.mark.ranks]  # torchrun and accelerate launches of two ranks

SCRIPTS = Path(__file__).resolve().parent / "distributed"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cuda"
OPTIMUM_FIXTURES = FIXTURES.parent / "optimum"


def _results(stdout: str, tag: str = "RESULT") -> dict[int, dict]:
    """The JSON object each rank printed after ``tag``, by rank.

    ``stdout`` holds each rank's output whole, one rank after the other (``launch.run_ranks``).
    """
    decoder = json.JSONDecoder()
    rows = [decoder.raw_decode(stdout, m.end())[0] for m in re.finditer(re.escape(tag) + " ", stdout)]
    return {row["rank"]: row for row in rows}


@pytest.fixture(scope="module")
def workdir(run_workdir: Path) -> Path:
    """The shared tiny memorised Llama and its data, plus the DDP weights probe."""
    (run_workdir / "probe.py").write_text(WEIGHTS_PROBE)
    return run_workdir


def test_collectives_move_data_between_ranks(workdir: Path) -> None:
    ranks = _results(torchrun("neuroncompat", [str(SCRIPTS / "collectives.py")], workdir, module=True).stdout)
    assert sorted(ranks) == [0, 1]
    for rank, r in ranks.items():
        assert (r["device"], r["backend"]) == (f"neuron:{rank}", "neuron")
        assert (
            r["all_reduce"] == [3.0, 3.0]
            and r["all_reduce_avg_bf16"] == [1.5, 1.5]
            and r["all_reduce_max"] == [2.0, 2.0]
        )
        assert r["all_reduce_transposed"] == [[1.0, 5.0], [3.0, 7.0]]
        assert r["all_gather_into_tensor"] == [0.0, 0.0, 1.0, 1.0]
        assert r["all_gather"] == [[0.0, 0.0], [1.0, 1.0]]
        assert r["broadcast"] == [1.0, 1.0, 1.0]
        assert r["broadcast_object_list"] == [{"from": 0}]
        assert r["all_gather_object"] == [{"rank": 0}, {"rank": 1}]
    assert (ranks[0]["reduce_scatter_tensor"], ranks[1]["reduce_scatter_tensor"]) == ([0.0, 3.0], [6.0, 9.0])
    assert (ranks[0]["reduce_scatter"], ranks[1]["reduce_scatter"]) == ([1.0, 1.0], [21.0, 21.0])
    assert (ranks[0]["all_to_all_single"], ranks[1]["all_to_all_single"]) == ([0.0, 10.0], [1.0, 11.0])
    assert ranks[1]["recv"] == [7.0, 7.0]


def _ddp_fixture_args(out: Path) -> list[str]:
    return [
        str(FIXTURES / "ddp_train_loop.expected.py"),
        "--model_name_or_path",
        "model",
        "--train_file",
        "train.txt",
        "--output_dir",
        str(out),
        "--max_steps",
        "3",
        "--batch_size",
        "2",
        "--block_size",
        "16",
    ]


def _check_ddp_run(stdout: str, out: Path) -> None:
    ranks = _results(stdout, "RANK_WEIGHTS")
    assert {r: row["device"] for r, row in ranks.items()} == {0: "neuron:0", 1: "neuron:1"}
    assert ranks[0]["digest"] == ranks[1]["digest"], "ranks diverged: gradients were not all-reduced"
    found = losses(stdout)
    assert len(found) == 3 and all(math.isfinite(x) for x in found)
    assert_trained_on_cpu(out, out.parent / "model")


def test_migrated_ddp_fixture_under_torchrun(workdir: Path) -> None:
    out = workdir / "ddp-torchrun"
    _check_ddp_run(torchrun("probe.py", _ddp_fixture_args(out), workdir).stdout, out)


def test_migrated_ddp_fixture_under_accelerate_launch(workdir: Path) -> None:
    out = workdir / "ddp-accelerate"
    _check_ddp_run(accelerate_launch("probe.py", _ddp_fixture_args(out), workdir).stdout, out)


def test_migrated_torch_xla_ddp_fixture_under_torchrun(workdir: Path) -> None:
    """The raw torch_xla DDP loop (``xm.optimizer_step``, ``MpDeviceLoader``, ``xmp.spawn``) ported."""
    out = workdir / "xla-ddp"
    out.mkdir()
    args = [
        str(OPTIMUM_FIXTURES / "xla_ddp_mnist.expected.py"),
        "--samples",
        "256",
        "--batch_size",
        "32",
        "--log_steps",
        "1",
        "--output_dir",
        str(out),
    ]
    stdout = torchrun("probe.py", args, workdir).stdout
    ranks = _results(stdout, "RANK_WEIGHTS")
    assert {r: row["device"] for r, row in ranks.items()} == {0: "neuron:0", 1: "neuron:1"}
    assert ranks[0]["digest"] == ranks[1]["digest"], "ranks diverged: gradients were not all-reduced"
    found = losses(stdout)
    assert len(found) == 4 and all(math.isfinite(x) for x in found)
    state = torch.load(out / "mlp.pt", map_location="cpu")
    assert all(t.device.type == "cpu" and torch.isfinite(t).all() for t in state.values())


def test_accelerate_multi_neuron_loop(workdir: Path) -> None:
    ranks = _results(accelerate_launch("probe.py", [str(SCRIPTS / "accelerate_loop.py")], workdir).stdout)
    for rank, r in ranks.items():
        assert r["distributed_type"] == "DistributedType.MULTI_NEURON"
        assert r["device"] == r["param_device"] == f"neuron:{rank}"
    assert ranks[0]["first_batch"] != ranks[1]["first_batch"], "each rank must see its own shard of the data"
    assert ranks[0]["digest"] == ranks[1]["digest"]


def test_fsdp2_shards_and_matches_single_process_training(workdir: Path) -> None:
    ranks = _results(torchrun("neuroncompat", [str(SCRIPTS / "fsdp2_step.py")], workdir, module=True).stdout)
    for rank, r in ranks.items():
        assert r["device"] == f"neuron:{rank}"
        assert r["local_shapes"] == [[8, 8], [8], [2, 16], [2]], "each rank holds half of every parameter"
    assert ranks[0]["max_diff_vs_cpu"] < 1e-5


@pytest.mark.parametrize("nproc", [1, 2])
def test_fsdp1_of_a_cpu_model_shards_and_matches_single_process_training(workdir: Path, nproc: int) -> None:
    """FSDP1 with ``device_id`` of a model built on the CPU (issue 41): ``shard()`` frees the flat parameter
    and sets it to its shard on the core, and the backward records gradients on FSDP's stream."""
    script = [str(SCRIPTS / "fsdp1_cpu_model.py")]
    ranks = _results(torchrun("neuroncompat", script, workdir, nproc=nproc, module=True).stdout)
    assert sorted(ranks) == list(range(nproc))
    for rank, r in ranks.items():
        assert r["flat_param_devices"] == [f"neuron:{rank}"] and r["loss_finite"]
        assert r["flat_param_numel"] == [212 // nproc], "each rank holds its share of the one flat parameter"
    assert ranks[0]["max_diff_vs_cpu"] < 1e-5


def test_trl_sft_under_torchrun_saves_a_cpu_loadable_adapter(workdir: Path) -> None:
    out = workdir / "sft-torchrun"
    result = torchrun(
        "neuroncompat",
        [
            str(FIXTURES / "sft_lora.expected.py"),
            "--model_name_or_path",
            "model",
            "--dataset_name",
            "train.jsonl",
            "--output_dir",
            str(out),
            "--max_steps",
            "2",
            "--per_device_train_batch_size",
            "2",
            "--max_length",
            "64",
        ],
        workdir,
        module=True,
    )
    assert losses(result.stdout) and all(math.isfinite(x) for x in losses(result.stdout))
    assert_adapter_trained_on_cpu(out, workdir / "model")


def test_tensor_parallel_load_and_greedy_generation(workdir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    prompt = " ".join((workdir / "train.txt").read_text().split()[:5])
    ranks = _results(
        torchrun("neuroncompat", [str(SCRIPTS / "tp_generate.py"), "model", prompt, "6"], workdir, module=True).stdout
    )
    for rank, r in ranks.items():
        assert r["sharded"] and r["device"] == f"neuron:{rank}"
        assert r["local_shape"][0] * 2 == r["full_shape"][0], "q_proj is split over the two ranks"
    tokenizer = AutoTokenizer.from_pretrained(workdir / "model")
    reference = AutoModelForCausalLM.from_pretrained(workdir / "model").generate(
        **tokenizer(prompt, return_tensors="pt"), max_new_tokens=6, do_sample=False
    )
    assert ranks[0]["ids"] == ranks[1]["ids"] == reference[0].tolist()


@pytest.fixture(scope="module")
def rank_checks(workdir: Path) -> dict[int, dict]:
    """One 2-rank run of ``distributed/rank_checks.py``, read by the tests below."""
    return _results(torchrun("neuroncompat", [str(SCRIPTS / "rank_checks.py")], workdir, module=True).stdout)


@pytest.mark.slow
@pytest.mark.xdist_group("rank_checks")  # one torchrun launch read by both tests
def test_index_less_neuron_is_the_rank_core(rank_checks: dict[int, dict]) -> None:
    assert sorted(rank_checks) == [0, 1]
    for rank, r in rank_checks.items():
        core = f"neuron:{rank}"
        assert r["device"] == core
        assert r["index_less"] == {
            "tensor_to": core,
            "module_to": core,
            "factory": core,
            "tensor_ctor": core,
            "accelerator_index": rank,
            "stream_index": rank,
            "generator": core,
            "tensor_ctor_in_device_context": core,
        }
        assert r["all_reduce_of_index_less"] == [3.0, 3.0]


@pytest.mark.slow
@pytest.mark.xdist_group("rank_checks")
def test_gathers_of_non_flat_tensors(rank_checks: dict[int, dict]) -> None:
    """accelerate's ``gather`` of ``[2, 1]`` rewards (TRL GRPO/RLOO) and the multi-dim c10d gathers."""
    block = [[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], [[100.0, 101.0, 102.0], [103.0, 104.0, 105.0]]]
    for r in rank_checks.values():
        assert r["accelerate_gather"] == r["all_gather_into_tensor"] == [[0.0], [1.0], [100.0], [101.0]]
        assert r["all_gather_into_tensor_stacked"] == r["all_gather"] == block
    assert rank_checks[0]["reduce_scatter_tensor"] == [[100.0, 102.0]]
    assert rank_checks[1]["reduce_scatter_tensor"] == [[104.0, 106.0]]
    assert rank_checks[0]["gather"] == [[[0.0, 1.0], [2.0, 3.0]], [[100.0, 101.0], [102.0, 103.0]]]


@pytest.mark.slow
def test_fsdp2_meta_device_init_trains_and_matches_single_process(workdir: Path) -> None:
    """``with torch.device("meta")`` + ``fully_shard`` + ``to_empty`` + ``reset_parameters()`` (DTensor RNG)."""
    ranks = _results(torchrun("neuroncompat", [str(SCRIPTS / "fsdp2_meta_init.py")], workdir, module=True).stdout)
    assert sorted(ranks) == [0, 1]
    for rank, r in ranks.items():
        assert r["device"] == f"neuron:{rank}" and r["local_shapes"] == [[8, 8], [8], [2, 16], [2]]
        assert r["initial_finite"] and r["trained"]
        assert r["shards_differ"], "each shard must draw its own values (DTensor RNG offsets)"
    assert ranks[0]["max_diff_vs_cpu"] < 1e-5


@pytest.mark.slow
def test_accelerate_save_load_state_and_trainer_resume_restore_weights_exactly(workdir: Path) -> None:
    out = workdir / "checkpoints"
    out.mkdir()
    ranks = _results(accelerate_launch(SCRIPTS / "accelerate_checkpoint.py", [str(out)], workdir).stdout)
    assert sorted(ranks) == [0, 1]
    for rank, r in ranks.items():
        assert r["device"] == f"neuron:{rank}"
        # Both ways restore the saved weights bit for bit, on the rank's core. With 2 processes accelerate
        # loads on_device, which safetensors rejects on a trn2 too; the shim's safetensors_device fixes it.
        assert r["load_state_on_device"] == r["load_state_cpu"] == {"exact": True, "devices": [f"neuron:{rank}"]}
        assert r["resume_exact"], "resume_from_checkpoint must end where the uninterrupted run ends"


@pytest.mark.slow
def test_trl_grpo_rloo_and_reward_trainers_two_steps_on_two_ranks(tiny_qwen: Path, tmp_path: Path) -> None:
    """Each gathers ``[batch, 1]`` rewards or metrics across ranks; a fresh reward head gets initialised."""
    ranks = _results(torchrun(SCRIPTS / "trl_trainers.py", [str(tiny_qwen), str(tmp_path / "out")], tmp_path).stdout)
    assert sorted(ranks) == [0, 1]
    for rank, r in ranks.items():
        assert r["device"] == r["param_device"] == f"neuron:{rank}"
        assert r["steps"] == [2, 2, 2]
        for trainer in ("grpo", "rloo", "reward"):
            assert len(r[trainer]) == 2 and all(math.isfinite(x) for x in r[trainer]), (trainer, r[trainer])
        assert 0.1 < r["reward"][0] < 10, f"a fresh reward head starts near log(2), got {r['reward'][0]}"


@pytest.mark.slow
def test_tensor_parallel_trainer_saves_a_full_model_that_loads_on_cpu(tiny_qwen: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    out = tmp_path / "tp"
    args = [str(SCRIPTS / "tp_trainer.py"), str(tiny_qwen), str(out)]
    ranks = _results(torchrun("neuroncompat", args, tmp_path, module=True).stdout)
    assert sorted(ranks) == [0, 1]
    for rank, r in ranks.items():
        assert r["sharded"] and r["device"] == f"neuron:{rank}"
        assert len(r["losses"]) == 2 and all(math.isfinite(x) for x in r["losses"])
    assert ranks[0]["losses"] == ranks[1]["losses"], "TP ranks compute one loss together"
    saved = AutoModelForCausalLM.from_pretrained(out / "final").state_dict()
    initial = AutoModelForCausalLM.from_pretrained(tiny_qwen).state_dict()
    shapes = {k: v.shape for k, v in initial.items()}
    assert {k: v.shape for k, v in saved.items()} == shapes, "saved shapes must be full"
    assert all(torch.isfinite(v).all() for v in saved.values())
    assert any(not torch.equal(saved[k], initial[k]) for k in initial), "no weight changed"


@pytest.mark.slow
def test_two_nodes_of_two_processes_on_localhost(tmp_path: Path) -> None:
    """``torchrun --nnodes 2 --node_rank N`` twice, rendezvous on 127.0.0.1: 4 ranks, 2 cores per node."""
    port = str(free_port())
    launches = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes",
                "2",
                "--nproc_per_node",
                "2",
                "--node_rank",
                str(node),
                "--master_addr",
                "127.0.0.1",
                "--master_port",
                port,
                "-m",
                "neuroncompat",
                str(SCRIPTS / "collectives.py"),
            ],
            # each rank's stdout in its own file (tests/launch.py:run_ranks says why)
            env=simulated_env(PET_LOG_DIR=str(tmp_path / f"node{node}"), PET_REDIRECTS="1"),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for node in (0, 1)
    ]
    outputs = [launch.communicate(timeout=600) for launch in launches]
    for launch, (stdout, stderr) in zip(launches, outputs):
        assert launch.returncode == 0, f"{stdout[-3000:]}\n{stderr[-6000:]}"
    ranks = _results("".join(log.read_text() for node in (0, 1) for log in rank_logs(tmp_path / f"node{node}")))
    assert sorted(ranks) == [0, 1, 2, 3]
    for rank, r in ranks.items():
        assert r["device"] == f"neuron:{rank % 2}", "each node's local ranks own that node's cores"
        assert r["all_reduce"] == [10.0, 10.0]
        assert r["all_gather_into_tensor"] == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
        assert r["all_gather_object"] == [{"rank": i} for i in range(4)]
    assert ranks[1]["recv"] == [7.0, 7.0]
