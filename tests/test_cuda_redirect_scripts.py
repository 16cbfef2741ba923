"""Unmodified CUDA scripts (``fixtures/redirect/``) run on the simulated NeuronCore with
``NEURONCOMPAT_CUDA=redirect``: single process, ``torchrun`` and ``accelerate launch`` (through
``neuroncompat simulate``). Each run must compute on ``neuron`` (peak neuron memory > 0, read by
a probe outside the script, or forwards recorded on the device), match the CPU where it can
(greedy tokens against the CPU bf16 reference, losses against a CPU run), and log its
redirected call sites with their ``neuron-migrate`` rules.
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
from fixture_runs import PROBE, assert_trained_on_cpu, losses
from launch import WEIGHTS_PROBE, free_port, run_ranks, simulated_env

from migrate.rule_families import get_rule

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "redirect"
pytestmark = pytest.mark.slow

# Per rank, at exit: the peak neuron memory of the rank's own core.
RANK_PROBE = """
import atexit, os, sys
import torch
from neuroncompat.runner import run
rank = int(os.environ.get("LOCAL_RANK", 0))
# one write per line: both ranks share torchrun's stdout, and print() writes the newline apart
atexit.register(lambda: os.write(1, f"NEURON_PEAK_BYTES {rank} {torch.neuron.max_memory_allocated(rank)}\\n".encode()))
run(sys.argv[1:])
"""


def _run(command: list[str], workdir: Path, log: Path, redirect: bool = True) -> subprocess.CompletedProcess[str]:
    extra = (
        {"NEURONCOMPAT_CUDA": "redirect", "NEURONCOMPAT_CUDA_LOG": str(log)}
        if redirect
        else {"NEURONCOMPAT_SIMULATE": "0"}
    )
    result = run_ranks(command, simulated_env(**extra), workdir, timeout=900)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return result


def _redirected(script: str, args: list[str], workdir: Path, log: Path) -> str:
    """Run an unmodified fixture under the redirect on the simulator; check it used neuron memory."""
    result = _run([sys.executable, "-c", PROBE, str(FIXTURES / script), *args], workdir, log)
    peak = re.search(r"NEURON_PEAK_BYTES (\d+)", result.stdout)
    assert peak and int(peak.group(1)) > 0, f"{script} did not compute on neuron:\n{result.stdout[-2000:]}"
    return result.stdout


def _logged(log: Path) -> list[dict]:
    return [site for path in sorted(log.glob("rank*.json")) for site in json.loads(path.read_text())["sites"]]


def _prompt(workdir: Path) -> str:
    return " ".join((workdir / "train.txt").read_text().split()[:5])


def _cpu_bf16_tokens(model_dir: Path, prompt: str, new_tokens: int) -> list[int]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).eval()
    inputs = tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=new_tokens, do_sample=False)
    return output[0, inputs["input_ids"].shape[1] :].tolist()


def test_chat_script_gives_the_cpu_bf16_greedy_tokens(run_workdir: Path, tmp_path: Path) -> None:
    prompt = _prompt(run_workdir)
    out = tmp_path / "tokens.json"
    _redirected(
        "chat_generate.py",
        ["--model_name_or_path", "model", "--prompt", prompt, "--max_new_tokens", "8", "--output_file", str(out)],
        run_workdir,
        tmp_path / "log",
    )
    assert json.loads(out.read_text()) == _cpu_bf16_tokens(run_workdir / "model", prompt, 8)
    calls = {(s["call"], s["rule"]) for s in _logged(tmp_path / "log")}
    assert ("from_pretrained(device_map='cuda')", "NM105") in calls
    assert ("torch.cuda.get_device_capability()", "NM904") in calls


def test_pipeline_on_gpu0_gives_the_cpu_bf16_text(run_workdir: Path, tmp_path: Path) -> None:
    args = ["--model_name_or_path", "model", "--prompt", _prompt(run_workdir), "--max_new_tokens", "8"]
    # As written, the script runs its pipeline in bf16 on the CPU where CUDA is absent: the reference.
    _run(
        [sys.executable, str(FIXTURES / "pipeline_gpu0.py"), *args, "--output_file", str(tmp_path / "cpu.json")],
        run_workdir,
        tmp_path,
        redirect=False,
    )
    stdout = _redirected(
        "pipeline_gpu0.py", [*args, "--output_file", str(tmp_path / "neuron.json")], run_workdir, tmp_path / "log"
    )
    assert "pipeline device: neuron:0" in stdout
    cpu, neuron = (json.loads((tmp_path / f"{side}.json").read_text()) for side in ("cpu", "neuron"))
    assert cpu.strip() and neuron == cpu


def test_argparse_device_cuda_training_matches_the_cpu_losses(run_workdir: Path, tmp_path: Path) -> None:
    args = ["--model_name_or_path", "model", "--train_file", "train.txt", "--max_steps", "3"]
    cpu = _run(
        [
            sys.executable,
            str(FIXTURES / "argparse_train.py"),
            *args,
            "--device",
            "cpu",
            "--output_dir",
            str(tmp_path / "cpu"),
        ],
        run_workdir,
        tmp_path,
        redirect=False,
    ).stdout
    neuron = _redirected(
        "argparse_train.py", [*args, "--output_dir", str(tmp_path / "neuron")], run_workdir, tmp_path / "log"
    )
    cpu_losses, neuron_losses = losses(cpu), losses(neuron)
    assert len(neuron_losses) == 3 and all(math.isfinite(x) for x in neuron_losses)
    assert neuron_losses == pytest.approx(cpu_losses, rel=1e-3)
    assert_trained_on_cpu(tmp_path / "neuron", run_workdir / "model")
    calls = {(s["call"], s["rule"]) for s in _logged(tmp_path / "log")}
    assert {("Module.to('cuda')", "NM102"), ("Tensor.to('cuda')", "NM102")} <= calls


@pytest.mark.ranks
def test_ddp_amp_grad_scaler_under_torchrun_with_two_ranks(run_workdir: Path, tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(free_port()),
        "-m",
        "neuroncompat",
        str(FIXTURES / "ddp_amp.py"),
        "--model_name_or_path",
        "model",
        "--train_file",
        "train.txt",
    ]
    # torchrun ... -m neuroncompat, with the probe in front of the shim's runner in each rank.
    command[command.index("-m", 3) : command.index("-m", 3) + 2] = ["--no-python", sys.executable, "-c", RANK_PROBE]
    result = _run(command, run_workdir, tmp_path / "log")
    peaks = dict(re.findall(r"NEURON_PEAK_BYTES (\d) (\d+)", result.stdout))
    assert set(peaks) == {"0", "1"} and all(int(v) > 0 for v in peaks.values()), result.stdout[-2000:]
    found = losses(result.stdout)
    assert len(found) == 4 and all(math.isfinite(x) for x in found)
    logs = sorted((tmp_path / "log").glob("rank*.json"))
    assert len(logs) == 2
    for path in logs:
        rules = {s["rule"] for s in json.loads(path.read_text())["sites"]}
        assert {"NM101", "NM104", "NM204", "NM205", "NM401"} <= rules
        assert all(get_rule(rule) is not None for rule in rules if rule)

    # The bridge: the command the log prints rewrites the same sites in the source for good.
    from neuroncompat.cuda.sites import Site, migrate_command

    copy = tmp_path / "ddp_amp.py"
    copy.write_text((FIXTURES / "ddp_amp.py").read_text())
    sites = [Site(**{**s, "file": str(copy)}) for s in json.loads(logs[0].read_text())["sites"]]
    command = migrate_command(sites).split()
    assert command[:2] == ["neuron-migrate", "--select"] and command[3] == "--write"
    migrated = subprocess.run(
        [sys.executable, "-m", "migrate", *command[1:]], capture_output=True, text=True, timeout=300
    )
    assert migrated.returncode == 0, migrated.stderr
    source = copy.read_text().split('"""', 2)[2]  # the code, without the module docstring
    assert "torch.cuda" not in source and '"nccl"' not in source
    # neuron-migrate keeps DDP's device_ids (with them DDP moves each CPU batch to the rank's core)
    assert "device_ids=[local_rank]" in source
    assert 'init_process_group("neuron")' in source and 'torch.autocast("neuron", dtype=torch.bfloat16)' in source


@pytest.mark.ranks
def test_accelerate_fp16_loop_through_neuroncompat_simulate(run_workdir: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    command = [
        sys.executable,
        "-m",
        "neuroncompat.cli",
        "simulate",
        "--cuda-redirect",
        "--format",
        "json",
        "-o",
        str(report_path),
        "--",
        "accelerate",
        "launch",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
        str(FIXTURES / "accelerate_fp16.py"),
        "--model_name_or_path",
        "model",
        "--train_file",
        "train.txt",
    ]
    # under `simulate`, which reads the launcher's output itself: not through run_ranks's per-rank log files
    result = subprocess.run(command, env=simulated_env(), cwd=run_workdir, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    assert (
        "distributed type: DistributedType.MULTI_NEURON, device: neuron:0, mixed precision: bf16, cuda available: True"
        in result.stdout
    )
    report = json.loads(report_path.read_text())
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert all(r["eager_shapes"] >= 1 for r in report["ranks"]), "no forward ran on the neuron device"
    sites = {s["call"]: s for s in report["cuda_redirect"]["sites"]}
    assert sites["torch.cuda.memory_summary()"]["ranks"] == [0, 1]
    assert "neuron-migrate --select NM104 --write" in report["cuda_redirect"]["migrate_command"]


def _loss_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(("step ", "[Epoch"))]


@pytest.mark.ranks
def test_gpt_from_scratch_nanogpt_style_compiled_and_under_torchrun(tmp_path: Path) -> None:
    """nanoGPT's CUDA idioms: compiled on one core (bf16 autocast, close to the CPU's fp32 losses),
    then DDP with ``device_ids`` on two ranks whose weights agree at the end."""
    script = str(FIXTURES / "gpt_from_scratch.py")
    cpu = _run([sys.executable, script, "--device=cpu"], tmp_path, tmp_path, redirect=False).stdout
    neuron = _redirected("gpt_from_scratch.py", ["--compile=True"], tmp_path, tmp_path / "log")
    cpu_losses, neuron_losses = losses(cpu), losses(neuron)
    assert len(neuron_losses) == 3 and neuron_losses == pytest.approx(cpu_losses, abs=0.05)
    calls = {s["call"]: s["rule"] for s in _logged(tmp_path / "log")}
    assert calls["torch.Generator(device='cuda')"] == "NM102" and "Tensor.is_cuda" in calls
    assert "torch.backends.cuda.matmul.allow_tf32 = True" in calls

    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port"]
    command += [str(free_port()), "--no-python", sys.executable, "-c", WEIGHTS_PROBE, script]
    result = _run(command, tmp_path, tmp_path / "log2")
    # both ranks share torchrun's stdout: their lines may run together, so match the records themselves
    ranks = [json.loads(found) for found in re.findall(r"RANK_WEIGHTS (\{[^}]*\})", result.stdout)]
    assert sorted(r["device"] for r in ranks) == ["neuron:0", "neuron:1"]
    assert len({r["digest"] for r in ranks}) == 1, "the ranks' weights differ: gradients were not reduced"
    assert len(losses(result.stdout)) == 3


def test_legacy_gan_with_cuda_tensor_types_matches_the_cpu_losses(tmp_path: Path) -> None:
    script = str(FIXTURES / "legacy_gan.py")
    cpu = _run([sys.executable, script], tmp_path, tmp_path, redirect=False).stdout
    neuron = _redirected("legacy_gan.py", [], tmp_path, tmp_path / "log")
    assert all(line.endswith(" neuron:0") for line in _loss_lines(neuron))
    expected = [line.replace(" cpu", " neuron:0") for line in _loss_lines(cpu)]
    assert len(expected) == 4 and _loss_lines(neuron) == expected
    calls = {s["call"] for s in _logged(tmp_path / "log")}
    assert {"torch.cuda.FloatTensor(...)", "Tensor.type(torch.cuda.FloatTensor)"} <= calls
    assert "isinstance(x, torch.cuda.FloatTensor)" in calls


@pytest.mark.ranks
def test_mp_spawn_workers_are_redirected_and_ddp_moves_cpu_batches(tmp_path: Path) -> None:
    """``python -m neuroncompat`` reaches the processes ``mp.spawn`` starts; DDP keeps ``device_ids``."""
    result = subprocess.run(
        [sys.executable, "-m", "neuroncompat", str(FIXTURES / "spawn_ddp.py")],
        env=simulated_env(
            NEURONCOMPAT_CUDA="redirect", NEURONCOMPAT_CUDA_LOG=str(tmp_path / "log"), MASTER_PORT=str(free_port())
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-6000:]
    found = re.findall(r"RANK (\d) device (neuron:\d) digest ([0-9a-f]{64})", result.stdout)
    assert sorted((rank, device) for rank, device, _ in found) == [("0", "neuron:0"), ("1", "neuron:1")], found
    assert len({digest for *_, digest in found}) == 1
    logs = sorted((tmp_path / "log").glob("rank*.json"))
    assert len(logs) == 3  # the parent and its two workers
    rules = {s["rule"] for s in _logged(tmp_path / "log")}
    assert {"NM104", "NM401"} <= rules
    assert result.stderr.count("CUDA redirect ran") == 1  # one summary, from the parent
