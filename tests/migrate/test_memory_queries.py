"""CUDA memory queries after a migration: statistics and summaries are torch.neuron's, a free-memory query
of the current accelerator asks torch.accelerator, any other device type gets a TODO; the migrated scripts
run on the simulator (slow).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from migrated import FIXTURES, migrate

# Class 3: free-memory queries of a device module picked at run time ----------------------------------------

GENERIC = "import torch\n\ndevice_type = torch.accelerator.current_accelerator().type\n\n\ndef free():\n    {call}\n"


@pytest.mark.parametrize(
    "call, after",
    [
        ("return getattr(torch, device_type, torch.cuda).mem_get_info()", "torch.accelerator.get_memory_info()"),
        ("return getattr(torch, device_type).mem_get_info(0)", "torch.accelerator.get_memory_info(0)"),
        ("return torch.get_device_module().mem_get_info(device=1)", "torch.accelerator.get_memory_info(1)"),
        (
            "return torch.get_device_module(torch.accelerator.current_accelerator().type).mem_get_info()",
            "torch.accelerator.get_memory_info()",
        ),
    ],
)
def test_the_current_accelerators_module_asks_torch_accelerator(call: str, after: str):
    out = migrate(GENERIC.format(call=call))
    assert f"    return {after}\n" in out and "NM935" not in out


@pytest.mark.parametrize(
    "call",
    [
        "return getattr(torch, args.device_type, torch.cuda).mem_get_info()",
        "return torch.get_device_module(name).mem_get_info()",
    ],
)
def test_a_device_type_not_tied_to_the_accelerator_gets_a_todo(call: str):
    out = migrate(GENERIC.format(call=call))
    assert "# TODO(neuron-migrate NM935): torch.neuron has no mem_get_info" in out
    assert call in out


def test_a_device_type_bound_to_something_else_too_gets_a_todo():
    src = GENERIC.format(call="return getattr(torch, device_type).mem_get_info()") + 'device_type = "cuda"\n'
    assert "NM935" in migrate(src)


def test_a_file_whose_only_cuda_token_is_the_generic_query_is_migrated():
    out = migrate("import torch\n\nfree, total = torch.get_device_module().mem_get_info()\n")
    assert "free, total = torch.accelerator.get_memory_info()" in out


@pytest.mark.slow
def test_the_migrated_memory_budget_script_runs_on_the_simulator(tmp_path: Path):
    """Before #41 the migration failed as the original does: `torch.neuron` has no `mem_get_info`."""
    pytest.importorskip("torch", reason="runs the migrated script on the simulator: needs torch")
    from fixture_runs import run_script

    out = run_script(FIXTURES / "memory_budget_generic.expected.py", [], tmp_path, on_neuron=True)
    free, total = map(int, re.search(r"free (\d+) of (\d+) bytes", out).groups())  # type: ignore[union-attr]
    assert 0 < free <= total
    assert "batch 64 on neuron:0" in out


# C7: CUDA memory queries: right on hardware and in the dry run -------------------------------------

MEMORY_SCRIPT = (
    "import torch\n\n"
    'if __name__ == "__main__":\n'
    '    x = torch.ones(1024, device="cuda")\n'
    "    torch.cuda.reset_max_memory_allocated()\n"
    "    stats = torch.cuda.memory_stats()\n"
    "    torch.cuda.synchronize()\n"
    '    print("PEAK", stats.get("allocated_bytes.all.peak"), torch.cuda.max_memory_reserved(), torch.cuda.memory_reserved())\n'
)


def test_c7_memory_statistics_are_torch_neurons():
    out = migrate(MEMORY_SCRIPT)
    for name in ("reset_peak_memory_stats", "memory_stats", "max_memory_reserved", "memory_reserved"):
        assert f"torch.neuron.{name}()" in out
    assert "torch.accelerator.synchronize()" in out


def test_c7_memory_summary_and_snapshot_are_torch_neurons_too():
    """TorchNeuron's caching allocator has them (memory-profiling guide); a CUDA guard around them now runs."""
    src = "import torch\nif torch.cuda.is_available():\n    print(torch.cuda.memory_summary(), torch.cuda.memory_snapshot())\n"
    out = migrate(src)
    assert (
        "if torch.neuron.is_available():\n    print(torch.neuron.memory_summary(), torch.neuron.memory_snapshot())"
        in out
    )
    assert "NM903" not in out


@pytest.mark.slow
def test_c7_the_migrated_memory_script_passes_its_dry_run(tmp_path: Path):
    pytest.importorskip("torch", reason="runs the migrated script on the simulator: needs torch")
    from launch import simulated_env

    script = tmp_path / "memory.py"
    script.write_text(migrate(MEMORY_SCRIPT))
    result = subprocess.run(
        [sys.executable, str(script)], env=simulated_env(), capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    peak, max_reserved, reserved = (int(v) for v in result.stdout.split("PEAK")[1].split())
    assert peak >= 4096 and max_reserved >= 4096 and reserved >= 4096
