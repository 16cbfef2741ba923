"""``visible_cores`` and the simulator's ``NEURON_RT_VISIBLE_CORES``: the runtime's documented rule, both ways.

The Neuron runtime takes one contiguous, increasing run of logical cores (``0``, ``0,1``, ``0-3``; not
``0-1,4-5`` nor ``3,5,6``) and renumbers them from 0; the TRL guide adds that ``1,2`` does not work
(neuroncompat/core_sets.py cites both). The shim refuses both kinds at ``import neuroncompat``; the
simulator shows the process only its cores and refuses what the runtime documents as invalid.
"""

from __future__ import annotations

import logging
import os
from types import ModuleType

import pytest
import torch
from helpers import run_python

from neuroncompat import core_sets
from neuroncompat.core_sets import parse_cores, refusal, runtime_refusal
from neuroncompat.patches.visible_cores import VisibleCoresError

_ENV = ("NEURON_RT_VISIBLE_CORES", "NEURON_LOGICAL_NC_CONFIG", "CUDA_VISIBLE_DEVICES", "NEURONCOMPAT_SIMULATE_CORES")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No visible-cores variable inherited from the caller."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


def test_parse_cores() -> None:
    assert parse_cores("0,1") == [0, 1]
    assert parse_cores("0-3") == [0, 1, 2, 3]
    assert parse_cores("0-1, 4-5") == [0, 1, 4, 5]
    assert parse_cores("3-5,6") == [3, 4, 5, 6]
    for bad in ("", "a", "3-1", "1-"):
        with pytest.raises(ValueError):
            parse_cores(bad)


@pytest.mark.parametrize("value", ["0", "3", "0,1", "0-3", "3-5,6", "1,2", "0-63"])
def test_the_runtime_accepts_one_increasing_run(value: str) -> None:
    assert runtime_refusal(value) is None


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("0-1,4-5", "is not contiguous"),
        ("3,5,6", "is not contiguous"),
        ("1,0", "Write it in increasing order, each core once: 0,1"),
        ("0,0", "Write it in increasing order, each core once: 0"),
        ("cores0", "is not a core list"),
    ],
)
def test_the_runtime_refuses_what_its_guide_calls_invalid(value: str, says: str) -> None:
    refused = runtime_refusal(value)
    assert refused is not None and says in refused


def test_the_trl_rule_applies_under_lnc2_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for works in ("0", "1", "0,1", "2,3", "0-3", "4-7"):
        assert refusal(works) is None, works
    refused = refusal("1,2")
    assert refused is not None
    assert "the TRL Trainium guide lists 0,1, 2,3 and 0-3 as working and 1,2 as not" in refused
    assert "Use 0,1 or 2,3, 0-3 for all of them" in refused
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    assert refusal("1,2") is None
    assert refusal("0-1,4-5") is not None  # the runtime's rule holds under any LNC


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("1,2", "NEURON_RT_VISIBLE_CORES=1,2 does not work: the TRL Trainium guide"),
        ("0-1,4-5", "NEURON_RT_VISIBLE_CORES=0-1,4-5 is not contiguous"),
    ],
)
def test_a_set_that_cannot_work_fails(shim: ModuleType, monkeypatch: pytest.MonkeyPatch, value: str, says: str) -> None:
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", value)
    with pytest.raises(VisibleCoresError) as failure:
        shim.apply()
    assert failure.value.patch_id == "visible_cores"
    assert shim.status()["visible_cores"].state == "failed"
    assert says in str(failure.value)


@pytest.mark.parametrize(
    ("cores", "lnc"), [("0", None), ("0,1", None), ("2,3", None), ("0-3", None), ("4-7", "2"), ("1,2", "1"), ("3", "1")]
)
def test_valid_sets_are_kept(shim: ModuleType, monkeypatch: pytest.MonkeyPatch, cores: str, lnc: str | None) -> None:
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", cores)
    if lnc is not None:
        monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", lnc)
    assert shim.apply()["visible_cores"].state == "applied"
    assert os.environ["NEURON_RT_VISIBLE_CORES"] == cores


@pytest.mark.parametrize(
    ("gpus", "lnc", "expected"),
    [
        ("2,3", None, "the equivalent is NEURON_RT_VISIBLE_CORES=2,3\n"),
        ("1,2", "1", "the equivalent is NEURON_RT_VISIBLE_CORES=1,2\n"),
        ("1,2", None, "the equivalent is NEURON_RT_VISIBLE_CORES=1,2, but NEURON_RT_VISIBLE_CORES=1,2 does not work"),
    ],
)
def test_cuda_visible_devices_is_translated_in_a_warning(
    shim: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    gpus: str,
    lnc: str | None,
    expected: str,
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpus)
    if lnc is not None:
        monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", lnc)
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        shim.apply()
    start = f"[visible_cores] CUDA_VISIBLE_DEVICES={gpus} is ignored by the Neuron runtime (every NeuronCore stays visible); "
    assert start + expected in caplog.text + "\n"
    assert "NEURON_RT_VISIBLE_CORES" not in os.environ


def test_disabled_by_name(shim: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "1,2")
    assert shim.apply(skip=["visible_cores"])["visible_cores"].state == "disabled"


# -- the simulator honours the variable ------------------------------------------------------------


@pytest.mark.parametrize(("value", "count"), [("0", 1), ("2,3", 2), ("1-3", 3)])
def test_the_simulator_shows_the_visible_cores_from_0(
    neuron: ModuleType, monkeypatch: pytest.MonkeyPatch, value: str, count: int
) -> None:
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", value)
    neuron.enable(cores=4)
    assert torch.neuron.device_count() == count  # type: ignore[attr-defined]
    assert torch.ones(1, device="neuron:0").device == torch.device("neuron", 0)
    with pytest.raises(RuntimeError):
        torch.ones(1, device=f"neuron:{count}")


@pytest.mark.parametrize(
    ("value", "host", "says"),
    [
        ("0-1,4-5", 8, "is not contiguous"),
        ("1,0", 8, "in consecutive increasing order"),
        ("2,3", 2, "names NeuronCore 3, but the simulated host has 2"),
    ],
)
def test_the_simulator_refuses_what_the_runtime_refuses(
    neuron: ModuleType, monkeypatch: pytest.MonkeyPatch, value: str, host: int, says: str
) -> None:
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", value)
    with pytest.raises(RuntimeError, match="the simulated Neuron runtime cannot start") as failure:
        neuron.enable(cores=host)
    assert says in str(failure.value)


def test_without_a_host_size_the_simulated_host_has_the_cores_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from neuroncompat import simulator

    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "6,7")
    assert simulator._visible_cores(None) == 2
    monkeypatch.delenv("NEURON_RT_VISIBLE_CORES")
    assert simulator._visible_cores(None) == simulator.DEFAULT_CORES
    assert core_sets.ENV == "NEURON_RT_VISIBLE_CORES"


# -- whole scripts under NEURONCOMPAT_SIMULATE=1 ---------------------------------------------------

_SCRIPT = "import neuroncompat, torch\nx = torch.ones(2, device='neuron')\nprint('ran', torch.neuron.device_count(), x.device)"


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
def test_a_single_core_pin_runs() -> None:
    proc = run_python(_SCRIPT, env={"NEURONCOMPAT_SIMULATE": "1", "NEURON_RT_VISIBLE_CORES": "0"}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "ran 1 neuron:0"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("1,2", "does not work: the TRL Trainium guide"),
        ("0-1,4-5", "is not contiguous: the Neuron runtime takes a list or range of NeuronCores"),
    ],
)
def test_a_script_stops_at_import_with_the_reason(value: str, says: str) -> None:
    proc = run_python(_SCRIPT, env={"NEURONCOMPAT_SIMULATE": "1", "NEURON_RT_VISIBLE_CORES": value}, timeout=120)
    assert proc.returncode == 1
    assert "ran" not in proc.stdout
    # The patch's message alone, before the simulated device starts: no traceback, no simulator warning.
    assert proc.stderr.startswith(f"neuroncompat [visible_cores]: NEURON_RT_VISIBLE_CORES={value} {says}"), proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_unpatched_script_with_an_invalid_set_gets_no_device() -> None:
    """No shim: the simulated runtime refuses the set as torch loads it, and the first device tensor fails."""
    code = "import torch\nx = torch.ones(2, device='neuron')\nprint('ran')"
    proc = run_python(code, env={"NEURONCOMPAT_SIMULATE": "1", "NEURON_RT_VISIBLE_CORES": "0-1,4-5"}, timeout=120)
    assert proc.returncode == 1
    assert "ran" not in proc.stdout
    assert "NEURON_RT_VISIBLE_CORES=0-1,4-5 is not contiguous" in proc.stderr
