"""Device ops a CPU dry run flags: data-dependent output shapes, and TorchNeuron's CPU fallbacks.

- **Data-dependent shapes**: ``nonzero``, ``masked_select``, ``unique``, boolean-mask indexing
  (``x[mask]``) and masked assignment (``x[mask] = v``) produce or touch a number of elements only
  the data knows. Neuron compiles static shapes: such an op breaks a ``torch.compile`` graph, and
  one that does compile can be wrong: masked assignment with a data-dependent selection compiles
  and runs on trn2 with **wrong values and no error** (aws-neuron-sdk#1381, :data:`WRONG_VALUES`,
  open). That report is against the XLA-based torch-neuronx (torch 2.9, torch-neuronx 2.9.0.2.15,
  libneuronxla), not TorchNeuron: whether TorchNeuron's compiler does the same is unknown, and the
  shape-stable rewrite each op carries is right either way.
- **CPU fallbacks**: ATen operators TorchNeuron's operator table marks ``CPU_FALLBACK``
  (:mod:`~neuroncompat.simulate.op_support`, plus those the user names) run on the host, with
  the tensors copied out and back every call.

- **Complex and float64 tensors on the device**: TorchNeuron decomposes complex ops only inside
  ``torch.compile`` (``TORCH_NEURONX_COMPLEX_DECOMPOSE``); eager complex ops follow the fallback
  policy. No NeuronCore engine lists FP64. Each is reported per op and user line (complex only outside
  a compiled graph); the report merges one line's ops and says what is unknown
  (:mod:`~neuroncompat.simulate.dtype_findings`).

:class:`OpWatcher` is the simulator's op observer (:func:`neuroncompat.simulator.observer.set_op_observer`):
it names the ops it watches once, and the C++ backend checks each op overload once, so the ops it
does not watch cost nothing. A watched op is reported with its user line, from the caller's stack in
eager mode and from the FX node's source line inside a compiled graph (the graph's first run;
later runs repeat the same ops). Ops while Dynamo traces (fake tensors) and during backward (the
gradient of ``x[mask]`` is again a masked op; the forward line is the one to fix) are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from neuroncompat import environment
from neuroncompat.simulate import op_support
from neuroncompat.simulate.kinds import FALLBACK_ENV
from neuroncompat.simulate.locations import caller_in, current_caller, frames_in
from neuroncompat.simulator import compile_backend, observer

WRONG_VALUES = "https://github.com/aws-neuron/aws-neuron-sdk/issues/1381"


@dataclass(frozen=True)
class OpFix:
    id: str
    message: str


MASKED_ASSIGNMENT = OpFix(
    "torch_where",
    "assign without selecting: x = torch.where(mask, value, x), or x.masked_fill_(mask, value) for a scalar: "
    "x keeps its shape",
)
BOOLEAN_SELECTION = OpFix(
    "keep_full_shape",
    "keep the full shape instead of selecting: torch.where(mask, x, 0) or x * mask, and reduce with the mask "
    "((x * mask).sum() / mask.sum()); or pad the selection to a fixed size",
)
NONZERO = OpFix(
    "nonzero_static",
    "use a fixed-size result: torch.nonzero_static(x, size=N, fill_value=-1), or compute with the mask itself",
)
UNIQUE = OpFix(
    "unique_outside_step",
    "move it out of the step (compute once on the CPU, before the loop) or pad its result to a fixed size",
)
REPEAT_INTERLEAVE = OpFix("output_size", "pass output_size= so the result's length is known without reading the data")
BINCOUNT = OpFix("fixed_length_scatter", "count into a fixed-length tensor: torch.zeros(N).scatter_add_(0, x, ones)")
CPU_FALLBACK = OpFix(
    "avoid_cpu_fallback",
    "TorchNeuron runs this operator on the CPU and copies the tensors back each call: use a supported equivalent, "
    "or move it out of the step (precompute it on the CPU)",
)

# ATen op (overload-free name) -> (what the user wrote, the fix).
_DATA_DEPENDENT: dict[str, tuple[str, OpFix]] = {
    "aten::nonzero": ("nonzero", NONZERO),  # argwhere, a composite, runs as nonzero and is reported as it
    "aten::masked_select": ("masked_select", BOOLEAN_SELECTION),
    "aten::_unique": ("unique", UNIQUE),
    "aten::_unique2": ("unique", UNIQUE),
    "aten::unique_dim": ("unique", UNIQUE),
    "aten::unique_consecutive": ("unique_consecutive", UNIQUE),
    "aten::unique_dim_consecutive": ("unique_consecutive", UNIQUE),
    "aten::bincount": ("bincount", BINCOUNT),
}
# Indexing ops that are data-dependent only with a boolean (or uint8) mask among the indices.
_MASK_INDEXING: dict[str, tuple[str, OpFix]] = {
    "aten::index": ("x[mask] (boolean-mask indexing)", BOOLEAN_SELECTION),
    "aten::_unsafe_index": ("x[mask] (boolean-mask indexing)", BOOLEAN_SELECTION),
    "aten::index_put_": ("x[mask] = ... (masked assignment)", MASKED_ASSIGNMENT),
    "aten::index_put": ("x[mask] = ... (masked assignment)", MASKED_ASSIGNMENT),
    "aten::_index_put_impl_": ("x[mask] = ... (masked assignment)", MASKED_ASSIGNMENT),
    "aten::_unsafe_index_put": ("x[mask] = ... (masked assignment)", MASKED_ASSIGNMENT),
}
# Internal ops the device sees in place of the public one the user's code called: ``x[mask] = v`` reaches a
# backend as ``_index_put_impl_`` (index_put_ is a composite over it); the report names the public op.
_PUBLIC_NAME = {"aten::_index_put_impl_": "aten::index_put_"}


def fix_for(kind: str, op: str) -> OpFix:
    """The fix for a finding of ``kind`` (``data_dependent`` or ``cpu_fallback``) on ``op``."""
    if kind == "cpu_fallback":
        return CPU_FALLBACK
    base = op.split(".")[0]
    entry = _DATA_DEPENDENT.get(base) or _MASK_INDEXING.get(base)
    return entry[1] if entry else BOOLEAN_SELECTION


def describe(op: str) -> str:
    """What the user wrote for a data-dependent ``op``: ``x[mask] = ... (masked assignment)``."""
    base = op.split(".")[0]
    entry = _DATA_DEPENDENT.get(base) or _MASK_INDEXING.get(base)
    return entry[0] if entry else op


def unknown_operators(names: Iterable[str]) -> list[str]:
    """The names among ``names`` that match no operator of the installed torch.

    ``aten::name`` matches any overload, ``aten::name.overload`` that overload. A composite op
    (``aten::layer_norm``, which reaches a backend only as the ops it decomposes into) is an
    operator: the simulator reports it where it is called.
    """
    known = set(torch._C._dispatch_get_all_op_names())
    bases = {name.split(".")[0] for name in known}
    return [name for name in names if name not in known and name not in bases]


def fallback_ops() -> frozenset[str]:
    """The table's CPU_FALLBACK operators plus those named in ``NEURONCOMPAT_SIMULATE_CPU_FALLBACK_OPS``."""
    return op_support.CPU_FALLBACK | frozenset(environment.names(FALLBACK_ENV))


# (kind, op, site, user line, graph signature or None)
Listener = Callable[[str, str, str | None, str | None, str | None], None]


class OpWatcher:
    """The simulator's op observer for ``neuroncompat simulate`` (see the module docstring)."""

    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        self._fallbacks = fallback_ops()

    def watched_ops(self) -> list[str]:
        return [*_DATA_DEPENDENT, *_MASK_INDEXING, *sorted(self._fallbacks)]

    def saw(self, name: str, events: int) -> None:
        from torch._guards import TracingContext

        if TracingContext.try_get() is not None or torch._C._current_graph_task_id() != -1:
            return
        base = name.split(".")[0]
        graph, node = compile_backend.running_graph()
        kinds = []
        if events & observer.WATCHED:
            if base in _DATA_DEPENDENT or (base in _MASK_INDEXING and events & observer.MASK):
                kinds.append("data_dependent")
            if name in self._fallbacks or base in self._fallbacks:
                kinds.append("cpu_fallback")
        if events & observer.COMPLEX and graph is None:
            kinds.append("complex_on_device")
        if events & observer.FLOAT64:
            kinds.append("fp64_on_device")
        if not kinds:
            return
        if graph is not None:
            if node is None:  # a later run of a graph whose first run was reported
                return
            site_at, user_at = caller_in(frames_in(node.meta.get("stack_trace") or ""))
            if user_at is None:
                user_at = current_caller()[1]
        else:
            site_at, user_at = current_caller()
        name = _PUBLIC_NAME.get(base, name)
        for kind in kinds:
            self._listener(kind, name, site_at, user_at, graph.signature if graph is not None else None)
