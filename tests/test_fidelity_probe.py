"""``bench/fidelity_probe.py``: every documented behaviour it probes matches on the simulated device.

The in-process probes run here on the ``neuron`` fixture; the ones that need a fresh process (visible cores)
and the command as a user runs it are the slow test.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

PROBE = Path(__file__).resolve().parent.parent / "bench" / "fidelity_probe.py"


@pytest.fixture(scope="module")
def probe_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fidelity_probe", PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_every_documented_in_process_behaviour_matches(neuron: object, probe_module: ModuleType) -> None:
    verdicts = {}
    for probe in probe_module.probes(simulated=True):
        if probe.id.startswith("visible_cores"):
            continue  # a child process each: the slow test
        seen, ok = probe.run()
        verdicts[probe.id] = (probe_module.verdict(ok), seen)
    differs = {pid: seen for pid, (verdict, seen) in verdicts.items() if verdict == "DIFFERS"}
    assert differs == {}
    unknown = {pid for pid, (verdict, _) in verdicts.items() if verdict == "unknown"}
    assert {"complex_eager", "float64", "int64_wide", "fp32_matmul", "autocast_defaults"} <= unknown
    assert verdicts["quantized"][0] == verdicts["compile_dynamic"][0] == "matches"


@pytest.mark.slow
def test_the_command_prints_a_verdict_per_behaviour() -> None:
    done = subprocess.run([sys.executable, str(PROBE), "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {row["id"]: row for row in json.loads(done.stdout)["rows"]}
    assert not [row for row in rows.values() if row["verdict"] == "DIFFERS"], rows
    assert rows["visible_cores_single"]["observed"] == "exit 0: 1 neuron:0"
    assert "is not contiguous" in rows["visible_cores_not_contiguous"]["observed"]
