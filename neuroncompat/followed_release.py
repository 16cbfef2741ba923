"""Which Neuron SDK release the patches and the simulator follow, and what its notes say.

Read 2026-12 (docs/simulator.md, "Which release this follows"):

- **Followed: Neuron 2.34.0** (2026-11-30), "TorchNeuron (Beta) 2.34.0": torch-neuronx 2.13.3.1 (PyTorch 2.13)
  and 2.14.3.1 (PyTorch 2.14) (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/2.34.0.html).
  What its notes say that neuroncompat acts on is :data:`RELEASE_NOTES`; the memory-profiling guide's advice
  is :data:`MEMORY_GUIDE`. The simulator's TorchNeuron baseline is this release (:data:`SIMULATOR_BASELINE`):
  flex attention and ``torch.nn.attention.varlen.varlen_attn`` run on the device (``simulator/flex_attention.py``,
  ``simulator/varlen_attention.py``) and the ``torch.accelerator`` memory functions report the simulator's
  allocator.
- **Also checked: Neuron 2.33.0** (2026-10-19), the TorchNeuron public beta, torch-neuronx 2.13.3.0 / 2.14.3.0
  (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html). Every
  patch was written against it; the ``torch/`` reference pages cited across neuroncompat were read under
  ``/en/latest/`` and are dated 2026-10 to 2026-11.

``neuroncompat doctor`` prints the followed release, the simulator's baseline and, per patch, whether it
applies, stood down (fixed upstream in ...) or is disabled; it notes an installed torch-neuronx of another
release. Plain Python: the doctor imports it before torch.
"""

from __future__ import annotations

FOLLOWED = "Neuron 2.34.0 (TorchNeuron beta: torch-neuronx 2.13.3.1 / 2.14.3.1, 2026-11-30)"
FOLLOWED_TORCH_NEURONX = ("2.13.3.1", "2.14.3.1")
# The releases every patch was checked against (a patch module names others in its docstring where it differs).
CHECKED = ("Neuron 2.33.0", "Neuron 2.34.0")
CHECKED_TORCH_NEURONX = ("2.13.3.0", "2.14.3.0", *FOLLOWED_TORCH_NEURONX)
SIMULATOR_BASELINE = "TorchNeuron 2.34.0"

# Neuron 2.34.0's release notes, as quoted; each is what a patch, a rule or the simulator follows.
RELEASE_NOTES = (
    "FlexAttention runs faster with more masks",  # patch attention keeps flex_attention; the simulator runs it
    # the simulator has both (simulator/varlen_attention.py); the rules and advice do not steer away from them
    "The torch.accelerator memory functions and torch.nn.attention.varlen.varlen_attn work on Neuron",
    "Public issues on cross-device copies, SDPA dropout gradients, and cache reuse are fixed",
    "FP8 and MXFP8 matmuls run on Neuron (TorchAO Neuron 0.18.0+neuron.1: MXFP8 on Trn3)",
)
MEMORY_GUIDE = "call torch.neuron.synchronize() before reading a statistic"


def installed_note(version: str | None) -> str | None:
    """A warning line when a real torch-neuronx of another release is installed, else None."""
    if version is None or version.startswith(CHECKED_TORCH_NEURONX) or "simulated" in version:
        return None
    return (
        f"torch-neuronx {version} is installed; neuroncompat follows {', '.join(FOLLOWED_TORCH_NEURONX)} "
        f"(checked against {', '.join(CHECKED_TORCH_NEURONX)}): where that release changed a behaviour, the "
        "patches and the simulator may not match it"
    )


def patch_line(patch_id: str, state: str, reason: str, detail: str) -> str:
    """One patch in the doctor's report: applies / stood down (fixed upstream in X) / disabled (and the rest)."""
    if state == "applied":
        return f"  {patch_id:<25} applies     {reason}"
    if state == "stood-down":
        where = detail.removeprefix("upstream fixed the gap (").removesuffix(")") or "upstream"
        return f"  {patch_id:<25} stood down (fixed upstream in {where}) {reason}"
    return f"  {patch_id:<25} {state:<11} {reason}" + (f" — {detail}" if detail else "")
