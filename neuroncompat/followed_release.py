"""Which Neuron SDK release the patches and the simulator follow, and what is known of the newer ones.

Read 2026-12 (docs/simulator.md, "Which release this follows"):

- **Followed: Neuron 2.33.0** (2026-10-19), TorchNeuron public beta, torch-neuronx 2.13.3.0 (PyTorch 2.13) and
  2.14.3.0 (PyTorch 2.14) (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html).
  The ``torch/`` reference pages cited across neuroncompat were read under ``/en/latest/`` and are dated between
  2026-10 and 2026-11; the Neuron runtime's ``NEURON_RT_VISIBLE_CORES`` rule and neuronx-cc's int64 flags in the
  2.32 sources (aws-neuron-sdk, 2026-08) and the latest pages, which agree.
- **Newer: Neuron 2.34.0** (2026-11-30; "TorchNeuron (Beta) 2.34.0",
  https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/2.34.0.html). Only the release notes'
  opening (the list of component cards) was readable; TorchNeuron 2.34.0's own notes were not (the component page
  read still opened with 2.33.0). Nothing of 2.34.0 is imitated or patched for: where it changed a behaviour,
  neuroncompat still shows 2.33.0's.

``neuroncompat doctor`` prints both, and says when the installed torch-neuronx is not a followed version.
Plain Python: the doctor imports it before torch.
"""

from __future__ import annotations

FOLLOWED = "Neuron 2.33.0 (TorchNeuron beta: torch-neuronx 2.13.3.0 / 2.14.3.0, 2026-10-19)"
FOLLOWED_TORCH_NEURONX = ("2.13.3.0", "2.14.3.0")
NEWER = (
    "Neuron 2.34.0 (2026-11-30, TorchNeuron beta 2.34.0) is out: its TorchNeuron notes were not readable when "
    "this was written, so nothing of it is followed yet"
)


def installed_note(version: str | None) -> str | None:
    """A warning line when a real torch-neuronx of another release is installed, else None."""
    if version is None or version.startswith(FOLLOWED_TORCH_NEURONX) or "simulated" in version:
        return None
    return (
        f"torch-neuronx {version} is installed; neuroncompat follows {', '.join(FOLLOWED_TORCH_NEURONX)}: "
        "where that release changed a behaviour, the patches and the simulator may not match it"
    )
