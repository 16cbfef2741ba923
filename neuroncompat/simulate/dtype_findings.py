"""Dtypes a dry run flags on the device: complex, float64 and int64, each saying what is documented and what is not.

The simulated device computes every CPU dtype exactly, so a script that depends on one of these passes its
dry run whatever TorchNeuron does with it. What is documented, and what is not:

- **complex** (``complex_on_device``, outside ``torch.compile`` only): TorchNeuron decomposes complex ops
  inside ``torch.compile`` (``TORCH_NEURONX_COMPLEX_DECOMPOSE``, on by default for torch >= 2.13); eager
  complex ops "follow the existing fallback policy"
  (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/env-vars.html). Which of them run
  on the CPU, and which fail, is in the per-op table nobody could read: unknown.
- **float64** (``fp64_on_device``, eager and compiled): no NeuronCore engine lists FP64 (the Tensor Engine
  lists cFP8/FP16/BF16/TF32/FP32,
  https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/neuron-core-v3.html).
  Whether TorchNeuron falls back to the CPU, narrows to float32 or fails is not documented: unknown.
- **int64** (``int64_on_device``: the int64 device inputs of compiled graphs and of outermost module calls,
  by input name; int64 made inside a forward is not listed). neuronx-cc documents its default:
  ``--native-int64=default`` downcasts int64 operations to int32, "which may lose precision for values
  outside the signed 32-bit range", and matmul, scatter-with-compute (``scatter_add``, ``index_add``),
  all-reduce and reduce-scatter have no integer datapath and compute in FP32 (lossy above 2**24)
  (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/compiler/neuronx-cc/api-reference-guide/index.html,
  ``--native-int64`` and ``--implicit-integer-downcast``). Which flags TorchNeuron passes the compiler is
  not documented: unknown. Token ids, positions and labels fit in int32 under either reading, so this
  kind is informational and not part of ``--strict`` (``strict = true``); ``--strict-kind int64_on_device``
  selects it.

Each fix is right under every reading: it changes nothing where TorchNeuron handles the dtype, and avoids
the failure or the wrong value where it does not.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DtypeFinding:
    """How the report shows one kind: what is unknown, the fix, and the sources."""

    unknown: str
    fix_id: str
    fix: str
    references: tuple[str, ...]


ENV_VARS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/env-vars.html"
NEURON_CORE_V3 = (
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/neuron-core-v3.html"
)
NEURONX_CC = (
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/compiler/neuronx-cc/api-reference-guide/index.html"
)

KINDS: dict[str, DtypeFinding] = {
    "complex_on_device": DtypeFinding(
        unknown="TorchNeuron decomposes complex ops only inside torch.compile (TORCH_NEURONX_COMPLEX_DECOMPOSE); "
        "eager complex ops follow its fallback policy, and whether this one runs on the CPU or fails is not "
        "documented",
        fix_id="complex_in_compile_or_real",
        fix="keep the complex math inside a torch.compile'd function (decomposed there), or write it with real "
        "tensors (torch.view_as_real; rotary embeddings as cos/sin pairs), or run it on the CPU",
        references=(ENV_VARS,),
    ),
    "fp64_on_device": DtypeFinding(
        unknown="no NeuronCore engine lists FP64, and whether TorchNeuron runs float64 on the CPU, narrows it "
        "to float32 or fails is not documented",
        fix_id="float32",
        fix="make it float32 (dtype=torch.float32 in the factory call, .float(); numpy arrays arrive as float64: "
        "torch.from_numpy(a).float()), or keep the float64 work on the CPU",
        references=(NEURON_CORE_V3,),
    ),
    "int64_on_device": DtypeFinding(
        unknown="neuronx-cc's default downcasts int64 operations to int32 (lossy outside the signed 32-bit "
        "range) and computes integer matmul, scatter_add/index_add and all-reduce in float32 (lossy above "
        "2**24); which compiler flags TorchNeuron uses is not documented",
        fix_id="int32_range",
        fix="nothing to change while the values fit in int32 (token ids, positions and labels do); keep wider "
        "integer arithmetic (hashes, products of counts, offsets past 2**31) and integer sums past 2**24 on "
        "the CPU",
        references=(NEURONX_CC,),
    ),
}
# Findings that ``--strict`` (``strict = true``) leaves out: the truth is unknown and the common case is fine.
NOT_STRICT_BY_DEFAULT = ("int64_on_device",)


GRAPH_INPUT = " (compiled graph input)"


def describe(kind: str, what: str) -> str:
    """The finding's one line: ``aten::mul.Tensor made a complex tensor on the device``, ``input_ids is int64 ...``."""
    if kind == "int64_on_device":
        name = what.removesuffix(GRAPH_INPUT)
        return f"{name} is an int64 tensor on the device" + (", a compiled graph's input" if name != what else "")
    dtype = "complex" if kind == "complex_on_device" else "float64"
    return f"{what} made a {dtype} tensor on the device"
