"""PyTorch's OpInfo samples give the same results on the simulated device as on the CPU.

The sweep itself is ``bench/opinfo_sweep.py`` (all of ``op_db``, about 2,000 op/dtype pairs, ~1 minute);
the suite runs its ``--quick`` subset: the ops a transformer's training step and a diffusion UNet use,
and every class that once differed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

SWEEP = Path(__file__).resolve().parent.parent / "bench" / "opinfo_sweep.py"


@pytest.fixture(scope="module")
def sweep_module() -> ModuleType:
    pytest.importorskip("expecttest")
    spec = importlib.util.spec_from_file_location("opinfo_sweep", SWEEP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    saved = dict(os.environ)
    try:
        spec.loader.exec_module(module)  # the script drops NEURONCOMPAT_SIMULATE for its own run
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return module


def test_quick_subset_matches_the_cpu(neuron: object, sweep_module: ModuleType) -> None:
    results = sweep_module.sweep(sweep_module.QUICK, [torch.float32, torch.bfloat16], limit=2)
    failures = [r for r in results if r.status in ("mismatch", "device_error")]
    assert not failures, "\n".join(f"{r.op} {r.dtype}: {r.status} {r.detail}" for r in failures)
    assert sum(r.status == "ok" for r in results) > 100, "the subset ran"


def test_the_comparison_sees_a_difference(neuron: object, sweep_module: ModuleType) -> None:
    """The sweep's equality is strict: one ulp, a NaN moved, or an output left on the CPU is reported."""
    cpu = torch.tensor([1.0, float("nan"), 3.0])
    assert sweep_module._equal(cpu, cpu.to("neuron"), values=True) == ""
    assert (
        sweep_module._equal(cpu, torch.tensor([1.0, float("nan"), 3.0000002]).to("neuron"), True) == "output 0 differs"
    )
    assert (
        sweep_module._equal(cpu, torch.tensor([float("nan"), 2.0, 3.0]).to("neuron"), True) == "output 0: NaNs differ"
    )
    assert "expected the device" in sweep_module._equal(cpu, cpu.clone(), True)
