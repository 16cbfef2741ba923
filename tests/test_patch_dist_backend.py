"""``dist_backend``: a script's ``init_process_group("nccl")`` gets the Neuron backend on Neuron.

The simulator registers its ``neuron`` process-group backend as torch-neuronx does
(``Backend.register_backend("neuron", ..., devices=["neuron"])``); each test runs in a fresh
interpreter, so the process groups it creates and destroys cannot leak into other tests, and
checks the real process group that the user's call creates.
"""

from __future__ import annotations

import json

import pytest
from helpers import run_python

_SCRIPT = """
import json, logging, sys
import torch, torch.distributed as dist
from neuroncompat import simulator
simulator.enable(cores=2)
import neuroncompat
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s %(message)s")

def init(backend):
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    try:
        name = dist.get_backend()
        total = torch.ones(2)
        if "cpu:gloo" in name:
            dist.all_reduce(total)
        return name
    finally:
        dist.destroy_process_group()

def attempt(backend):
    try:
        return init(backend)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"

neuroncompat.revert()
result = {"without": attempt("nccl")}
neuroncompat.revert(); neuroncompat.apply()
for backend in ("nccl", "cuda:nccl", "cpu:gloo,cuda:nccl", "gloo", "neuron"):
    result[backend] = attempt(backend)
neuroncompat.revert(); neuroncompat.apply(skip=["dist_backend"])
result["skipped"] = attempt("nccl")
neuroncompat.revert()
result["reverted"] = attempt("nccl")
print(json.dumps(result))
"""


def _nccl_refused(outcome: str) -> bool:
    """``init_process_group("nccl")`` failed because NCCL cannot run here: the CPU build of torch
    raises "RuntimeError: Distributed package doesn't have NCCL built in", the default (CUDA)
    build on a machine without a GPU "ValueError: ProcessGroupNCCL is only supported with GPUs"."""
    kind, _, message = outcome.partition(": ")
    return kind in ("RuntimeError", "ValueError") and "NCCL" in message


# the tests share a module fixture that starts fresh processes: one pytest worker runs them all
pytestmark = pytest.mark.xdist_group("dist_backend_outcome")


@pytest.fixture(scope="module")
def outcome() -> tuple[dict[str, str], str]:
    proc = run_python(_SCRIPT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
def test_gap_nccl_fails_without_the_patch(outcome: tuple[dict[str, str], str]) -> None:
    result, _ = outcome
    assert _nccl_refused(result["without"]), result["without"]


def test_nccl_becomes_the_neuron_backend(outcome: tuple[dict[str, str], str]) -> None:
    result, log = outcome
    assert result["nccl"] == "neuron"
    assert result["cuda:nccl"] == "neuron:neuron"
    assert result["cpu:gloo,cuda:nccl"] == "cpu:gloo,neuron:neuron"  # and a CPU all_reduce ran over gloo
    assert 'neuroncompat [dist_backend] init_process_group("nccl") -> "neuron" (NCCL needs CUDA)' in log
    assert 'init_process_group("cpu:gloo,cuda:nccl") -> "cpu:gloo,neuron:neuron"' in log


def test_backends_that_work_are_kept(outcome: tuple[dict[str, str], str]) -> None:
    result, _ = outcome
    assert result["gloo"] == "gloo"
    assert result["neuron"] == "neuron"


def test_disabled_by_name_and_reverted(outcome: tuple[dict[str, str], str]) -> None:
    result, _ = outcome
    assert _nccl_refused(result["skipped"]), result["skipped"]
    assert _nccl_refused(result["reverted"]), result["reverted"]


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
def test_without_a_registered_neuron_backend_the_call_is_kept() -> None:
    """Where torch-neuronx's distributed support is not loaded, there is nothing to map NCCL to."""
    proc = run_python(
        """
        import logging, sys
        import torch.distributed as dist
        from neuroncompat import simulator
        simulator.enable(cores=2)
        del dist.Backend.default_device_backend_map["neuron"]
        import neuroncompat
        neuroncompat.revert(); neuroncompat.apply()
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s %(message)s")
        try:
            dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
        except (RuntimeError, ValueError) as exc:  # the CPU build's error, the CUDA build's without a GPU
            print(f"{type(exc).__name__}: {exc}")
        """,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert _nccl_refused(proc.stdout.strip()), proc.stdout
    assert '[dist_backend] init_process_group("nccl") kept: no process-group backend is registered' in proc.stderr
