"""``visible_cores``: an unaligned NEURON_RT_VISIBLE_CORES stops the script at once, naming valid sets.

The simulator does not model the Neuron runtime's core allocation, so the runtime's own late
failure is not reproduced here; these tests check the early validation and its messages.
"""

from __future__ import annotations

import logging
from types import ModuleType

import pytest
from helpers import run_python

from neuroncompat.patches.visible_cores import VisibleCoresError, parse_cores


@pytest.fixture
def shim(shim: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The shared ``shim`` fixture, with no visible-cores variable inherited from the caller."""
    for name in ("NEURON_RT_VISIBLE_CORES", "NEURON_LOGICAL_NC_CONFIG", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    return shim


def test_parse_cores() -> None:
    assert parse_cores("0,1") == [0, 1]
    assert parse_cores("0-3") == [0, 1, 2, 3]
    assert parse_cores("0-1, 4-5") == [0, 1, 4, 5]
    for bad in ("", "a", "3-1", "1-"):
        with pytest.raises(ValueError):
            parse_cores(bad)


def test_unaligned_pair_fails_with_the_valid_choices(shim: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "1,2")
    with pytest.raises(VisibleCoresError) as failure:
        shim.apply()
    assert failure.value.patch_id == "visible_cores"
    assert shim.status()["visible_cores"].state == "failed"
    message = str(failure.value)
    assert "NEURON_RT_VISIBLE_CORES=1,2 is not a set of aligned core pairs" in message
    assert "Use 0,1 or 2,3 (one logical core each), 0-3 (two)" in message


def test_a_script_stops_at_import(shim: ModuleType) -> None:
    proc = run_python(
        "import neuroncompat\nprint('the script ran')",
        env={"NEURONCOMPAT_SIMULATE": "1", "NEURON_RT_VISIBLE_CORES": "1,2"},
        timeout=120,
    )
    assert proc.returncode == 1
    assert "the script ran" not in proc.stdout
    # The message alone, naming the patch: no traceback through the import machinery.
    stop = "neuroncompat [visible_cores]: NEURON_RT_VISIBLE_CORES=1,2 is not a set of aligned core pairs"
    assert proc.stderr.startswith(stop)
    assert "Traceback" not in proc.stderr


def test_malformed_value_fails(shim: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "cores0")
    with pytest.raises(VisibleCoresError, match="is not a core list"):
        shim.apply()


@pytest.mark.parametrize(
    ("cores", "lnc"), [("0,1", None), ("2,3", None), ("0-3", None), ("4-7", "2"), ("1,2", "1"), ("3", "1")]
)
def test_valid_sets_are_kept(shim: ModuleType, monkeypatch: pytest.MonkeyPatch, cores: str, lnc: str | None) -> None:
    import os

    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", cores)
    if lnc is not None:
        monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", lnc)
    assert shim.apply()["visible_cores"].state == "applied"
    assert os.environ["NEURON_RT_VISIBLE_CORES"] == cores


@pytest.mark.parametrize(
    ("lnc", "expected"), [(None, "NEURON_RT_VISIBLE_CORES=2-5"), ("1", "NEURON_RT_VISIBLE_CORES=1,2")]
)
def test_cuda_visible_devices_is_translated_in_a_warning(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, lnc: str | None, expected: str
) -> None:
    import os

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    if lnc is not None:
        monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", lnc)
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        shim.apply()
    assert (
        f"[visible_cores] CUDA_VISIBLE_DEVICES=1,2 is ignored by the Neuron runtime (every NeuronCore stays visible); the equivalent is {expected}"
        in caplog.text
    )
    assert "NEURON_RT_VISIBLE_CORES" not in os.environ


def test_disabled_by_name(shim: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "1,2")
    assert shim.apply(skip=["visible_cores"])["visible_cores"].state == "disabled"
