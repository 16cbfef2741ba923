"""``neuroncompat doctor`` says which Neuron release the patches and the simulator follow (#23 item 9, #32):
Neuron 2.34.0, the simulator's TorchNeuron baseline, and per patch applies / stood down (fixed upstream in X) /
disabled."""

from __future__ import annotations

from types import ModuleType

import pytest

from neuroncompat import doctor, followed_release
from neuroncompat.detect import Detection


def test_the_doctor_names_the_followed_release_and_the_checked_ones() -> None:
    lines = doctor.report()
    (follows,) = [line for line in lines if line.startswith("follows: ")]
    assert "Neuron 2.34.0" in follows and "2.13.3.1 / 2.14.3.1" in follows and "2026-11-30" in follows
    assert "patches checked against Neuron 2.33.0, Neuron 2.34.0" in follows
    assert "nothing of it is followed" not in follows


def test_the_release_notes_followed_are_2_34s() -> None:
    notes = " | ".join(followed_release.RELEASE_NOTES)
    assert "FlexAttention runs faster with more masks" in notes
    assert "torch.accelerator memory functions and torch.nn.attention.varlen.varlen_attn work on Neuron" in notes
    assert "cross-device copies, SDPA dropout gradients, and cache reuse are fixed" in notes
    assert "torch.neuron.synchronize()" in followed_release.MEMORY_GUIDE


def test_the_simulator_reports_its_baseline_and_each_patch_applies(shim: ModuleType) -> None:
    shim.apply(skip=["unused_device"])
    lines = doctor.report()
    assert "simulator baseline: TorchNeuron 2.34.0" in lines
    assert "torch-neuronx kind: simulated 2.13.3.1+simulated" in lines
    patches = {
        line.split()[0]: line for line in lines[lines.index(next(x for x in lines if x.startswith("patches"))) :]
    }
    assert patches["attention"].split()[1] == "applies"
    assert patches["unused_device"].split()[1] == "disabled"


def test_a_stood_down_patch_says_where_upstream_fixed_it() -> None:
    line = followed_release.patch_line("attention", "stood-down", "why", "upstream fixed the gap (torch-neuronx 2.35)")
    assert "stood down (fixed upstream in torch-neuronx 2.35)" in line


@pytest.mark.parametrize(
    ("version", "noted"),
    [
        ("2.13.3.1", False),
        ("2.14.3.1.post1", False),
        ("2.13.3.0", False),
        ("2.14.3.0", False),
        ("2.13.3.1+simulated", False),
        (None, False),
        ("2.13.3.2", True),
        ("2.35.0", True),
    ],
)
def test_another_installed_release_is_noted(version: str | None, noted: bool) -> None:
    assert (followed_release.installed_note(version) is not None) is noted


def test_the_note_appears_for_a_native_torch_neuronx_of_another_release(monkeypatch: pytest.MonkeyPatch) -> None:
    found = Detection("native", "2.35.0", "TorchNeuron torch-neuronx 2.35.0 is installed")
    monkeypatch.setattr(doctor.shim, "detection", lambda: found)
    monkeypatch.setattr(doctor.shim, "status", dict)
    monkeypatch.setattr(doctor.redirect_status, "lines", lambda on_neuron: [])
    monkeypatch.setattr(doctor, "_import_patch_targets", lambda: None)
    import torch

    monkeypatch.setattr(torch, "neuron", type("M", (), {"device_count": staticmethod(lambda: 4)}), raising=False)
    lines = doctor.report()
    assert any(line.startswith("NOTE: torch-neuronx 2.35.0 is installed; neuroncompat follows") for line in lines)
    assert not any(line.startswith("simulator baseline") for line in lines)
