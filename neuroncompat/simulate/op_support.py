"""TorchNeuron's operator-support table, as data: the ATen operators that run on the CPU (``CPU_FALLBACK``).

The AWS Neuron documentation page "Supported PyTorch APIs and operators" (:data:`SOURCE`, dated
2026-11-06) classifies every public PyTorch API as ``Y`` (runs on the device, or host-only),
``CPU_FALLBACK`` ("works, but the named ATen operator runs on the CPU and the result is copied back
to the Neuron device. The model runs; the operation is slower") or ``N``. The per-operator table
itself lives in the torch-neuronx repository (:data:`TABLE`) and is regenerated for every
torch-neuronx release.

That per-operator table could not be read when this module was written (the torch-neuronx
repository was not reachable from the development machine; the documentation page gives only
the classification and the table's address), so :data:`CPU_FALLBACK` cites no operator and
lists none. It is not guessed: an operator named here without the table to cite would make
``neuroncompat simulate --strict`` fail runs on hearsay. Until it is filled from the table, name
the ``CPU_FALLBACK`` operators of your torch-neuronx release in your project's ``pyproject.toml``
(``[tool.neuroncompat.simulate] cpu-fallback-ops = ["aten::..."]``) or with
``neuroncompat simulate --cpu-fallback-op aten::...``; they are added to this set.
"""

from __future__ import annotations

SOURCE = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/supported-operators.html"
TABLE = "https://github.com/aws-neuron/torch-neuronx/blob/main/docs/torch_api_compatibility.md"
# When SOURCE was read (its own date-modified: 2026-11-06).
RETRIEVED = "2026-12-01"

# ATen operators the table marks CPU_FALLBACK, as ``aten::name`` (any overload) or
# ``aten::name.overload``. Empty: see the module docstring.
CPU_FALLBACK: frozenset[str] = frozenset()
