"""``neuroncompat doctor`` says which Neuron release the patches and the simulator follow (#23 item 9)."""

from __future__ import annotations

import pytest

from neuroncompat import doctor, followed_release
from neuroncompat.detect import Detection


def test_the_doctor_names_the_followed_and_the_newer_release() -> None:
    lines = doctor.report()
    (follows,) = [line for line in lines if line.startswith("follows: ")]
    assert "Neuron 2.33.0" in follows and "2.13.3.0 / 2.14.3.0" in follows
    assert "Neuron 2.34.0 (2026-11-30" in follows and "nothing of it is followed yet" in follows


@pytest.mark.parametrize(
    ("version", "noted"),
    [("2.13.3.0", False), ("2.14.3.0.post1", False), ("2.13.3.0+simulated", False), (None, False), ("2.34.0", True)],
)
def test_another_installed_release_is_noted(version: str | None, noted: bool) -> None:
    assert (followed_release.installed_note(version) is not None) is noted


def test_the_note_appears_for_a_native_torch_neuronx_of_another_release(monkeypatch: pytest.MonkeyPatch) -> None:
    found = Detection("native", "2.34.0", "TorchNeuron torch-neuronx 2.34.0 is installed")
    monkeypatch.setattr(doctor.shim, "detection", lambda: found)
    monkeypatch.setattr(doctor.shim, "status", dict)
    monkeypatch.setattr(doctor.redirect_status, "lines", lambda on_neuron: [])
    monkeypatch.setattr(doctor, "_import_patch_targets", lambda: None)
    import torch

    monkeypatch.setattr(torch, "neuron", type("M", (), {"device_count": staticmethod(lambda: 4)}), raising=False)
    lines = doctor.report()
    assert any(line.startswith("NOTE: torch-neuronx 2.34.0 is installed; neuroncompat follows") for line in lines)
