"""Shared fixtures: offline hub, tiny local models, and the simulated Neuron device.

PyTorch lets the PrivateUse1 backend be renamed once per process, so the simulator stays
registered for the whole session once a test enables it; the ``neuron`` fixture turns it on and
off around each test and resets what libraries cache about the device. Tests that need a
process that never saw the device use :func:`run_python` (a subprocess).

Nothing here imports torch unless it is installed: ``pytest tests/migrate`` runs with only the
codemod installed (``pip install .`` and the test tools), and the tests that need the simulator
stack (torch, transformers, TRL, accelerate) are reported as skipped, with the missing package
as the reason, instead of failing to import.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"
os.environ.pop("NEURONCOMPAT_SIMULATE", None)
# One intra-op thread per process: `pytest -n 2` already runs two workers on CI's two cores, and each worker (and
# each script it starts) defaulting to a thread per core oversubscribes them; the spinning OpenMP threads then burn
# CPU waiting on each other. Measured on the 2-core machine under load: one step of the tiny Llama 0.2-0.6 CPU-s
# with 2 threads, 0.02 with 1; tests/test_simulate_scenarios.py 61 CPU-s against 48. Set, not forced.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
SIMULATOR_STACK = ("torch", "transformers", "trl", "accelerate", "datasets", "peft")
MISSING_STACK = [name for name in SIMULATOR_STACK if importlib.util.find_spec(name) is None]
SKIP_REASON = f"needs the simulator stack: {', '.join(MISSING_STACK)} not installed (pip install -e '.[test]')"


def pytest_configure(config: pytest.Config) -> None:
    """Register ``neuron`` as PyTorch's PrivateUse1 name, so test modules can write
    ``torch.device("neuron", 1)`` at collection time. Registering is not enabling: the device
    stays unavailable until a test asks for the ``neuron`` fixture.

    Under ``-n N`` the tests are spread as ``--dist loadgroup`` (pytest-xdist's ``load`` that keeps each
    ``xdist_group`` in one worker) unless ``--dist`` is given: tests that read one expensive result (the CI
    subset's checks, tests/ci_subset.py) then find it in their worker instead of each computing it again. The
    workers must be told too: each parses the command line again, and one that does not see ``loadgroup`` leaves
    its tests ungrouped, so the controller spreads every group over both workers (tests/test_suite_grouping.py).
    Not an ``addopts`` option: ``--dist`` is unknown where xdist is not loaded (``-p no:xdist``)."""
    if getattr(config.option, "dist", None) == "load" and not any(
        arg.startswith(("--dist", "-d")) for arg in config.invocation_params.args
    ):
        config.option.dist = "loadgroup"
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_TellWorkersTheDistMode(), "neuroncompat-dist-mode")
    if getattr(config, "workerinput", {}).get("neuroncompat_loadgroup"):
        config.option.loadgroup = True  # read by xdist's worker when it names each test's group
    if "torch" in MISSING_STACK:
        return
    from neuroncompat.simulator import register_backend

    register_backend()


class _TellWorkersTheDistMode:
    """Controller side: passes the dist mode chosen above to each worker (xdist's ``pytest_configure_node``)."""

    @pytest.hookimpl
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["neuroncompat_loadgroup"] = node.config.option.dist == "loadgroup"


class _NeedsSimulatorStack(pytest.Module):
    """A test module outside ``tests/migrate`` (the shim and the simulator: they all run torch and
    the Hugging Face libraries) where that stack is missing: one skip with the reason, nothing imported."""

    def collect(self) -> list[pytest.Item]:
        raise pytest.skip.Exception(SKIP_REASON, allow_module_level=True)


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if MISSING_STACK and (TESTS / "migrate") not in module_path.parents:
        return _NeedsSimulatorStack.from_parent(parent, path=module_path)
    return None


def _require_simulator_stack() -> None:
    if MISSING_STACK:
        pytest.skip(SKIP_REASON)


@pytest.fixture(scope="session")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _require_simulator_stack()
    from neuroncompat.testing import build_causal_lm

    return build_causal_lm(tmp_path_factory.mktemp("tiny-qwen3"), arch="qwen3")


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _require_simulator_stack()
    from neuroncompat.testing import build_causal_lm

    return build_causal_lm(tmp_path_factory.mktemp("tiny-llama"), arch="llama")


@pytest.fixture(scope="session")
def tiny_sd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Stable Diffusion pipeline of ``neuroncompat.testing`` saved in a folder (needs diffusers)."""
    _require_simulator_stack()
    pytest.importorskip("diffusers")
    from neuroncompat.testing import build_stable_diffusion

    return build_stable_diffusion(tmp_path_factory.mktemp("tiny-sd"))


def _reset_library_state() -> None:
    import torch._dynamo
    from accelerate.state import AcceleratorState, GradientState, PartialState

    AcceleratorState._reset_state(reset_partial_state=True)
    PartialState._reset_state()
    GradientState._reset_state()
    torch._dynamo.reset()


@contextlib.contextmanager
def _simulated(cores: int) -> Iterator[ModuleType]:
    """The simulated device with ``cores`` cores, on for the block, with what libraries cache about it reset."""
    _require_simulator_stack()
    import neuroncompat
    from neuroncompat import simulator

    # The device without the shim: importing neuroncompat started the shim off Neuron, and enabling the device
    # would start its patches (as it does for a user who imports neuroncompat first); a test that wants them
    # applies them (the `shim` fixture).
    neuroncompat.revert()
    _reset_library_state()
    simulator.enable(cores=cores)
    simulator.reset_compiles()
    try:
        yield simulator
    finally:
        simulator.disable()
        simulator.reset_compiles()
        _reset_library_state()


@pytest.fixture
def neuron() -> Iterator[object]:
    """The simulated device with 2 cores, on for the duration of one test."""
    with _simulated(2) as simulator:
        yield simulator


OWN_CORES = 4


@pytest.fixture
def own_core() -> Iterator[int]:
    """A core of its own for a test that reads memory statistics exactly: the simulator with 4 cores and this
    thread's current device set to the last, which no other test uses. A thread an earlier test left in this
    pytest worker (a DataLoader's, a compile worker's) allocates on its own current core, core 0 unless it chose,
    and would move core 0's counts while the test reads them (CI saw +1024 bytes once)."""
    with _simulated(OWN_CORES):
        import torch

        core = OWN_CORES - 1
        torch.neuron.set_device(core)
        torch.neuron.synchronize(core)
        torch.neuron.empty_cache()
        torch.neuron.reset_peak_memory_stats(core)
        try:
            yield core
        finally:
            torch.neuron.set_device(0)


@pytest.fixture
def shim(neuron: object) -> Iterator[ModuleType]:
    """The shim on the simulated device, off at the start (the test applies it), reverted at the end."""
    import neuroncompat

    neuroncompat.revert()
    try:
        yield neuroncompat
    finally:
        neuroncompat.revert()


@pytest.fixture(scope="session")
def run_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny memorised Llama and its training data for every test that runs a script
    (migrated fixtures, distributed launches): trained once per run, a copy per worker (tests/built_once.py)."""
    _require_simulator_stack()
    from built_once import built_once
    from fixture_runs import build_workdir

    return built_once(tmp_path_factory, "runs", build_workdir)
