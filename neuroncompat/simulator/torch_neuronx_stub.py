"""A ``torch_neuronx`` module for the simulator, so libraries detect Neuron as on hardware.

transformers (``is_torch_neuron_available``), accelerate (``is_neuron_available``) and TRL all
start with ``importlib.util.find_spec("torch_neuronx")`` and then look at ``torch.neuron``. The
stub is placed in ``sys.modules`` with a real ``ModuleSpec`` only while simulating.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types

STUB_VERSION = "2.13.3.0+simulated"


def install() -> None:
    if "torch_neuronx" in sys.modules and not getattr(sys.modules["torch_neuronx"], "__simulated__", False):
        raise RuntimeError("a real torch_neuronx module is already imported; refusing to shadow it")
    module = types.ModuleType("torch_neuronx", "Simulated torch-neuronx (neuroncompat.simulator).")
    module.__spec__ = importlib.machinery.ModuleSpec("torch_neuronx", loader=None, origin="neuroncompat-simulator")
    module.__version__ = STUB_VERSION  # type: ignore[attr-defined]
    module.__simulated__ = True  # type: ignore[attr-defined]
    sys.modules["torch_neuronx"] = module


def uninstall() -> None:
    module = sys.modules.get("torch_neuronx")
    if module is not None and getattr(module, "__simulated__", False):
        del sys.modules["torch_neuronx"]
