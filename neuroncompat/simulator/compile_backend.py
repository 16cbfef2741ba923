"""The ``neuron`` torch.compile backend of the simulator: it records every graph, then runs it.

On Trainium each distinct graph costs a Neuron compilation (about a minute, per the TRL guide),
so the record is what a dry run is for: ``simulator.compiles()`` lists each graph with its input
shapes and dtypes, a stable signature, and the source line that triggered it. A graph with
symbolic (dynamic) dimensions is marked ``rejected``: the real backend refuses ``dynamic=True``
graphs (TRL #7660), which Dynamo produces by default once a second shape is seen unless
``automatic_dynamic_shapes`` is off.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import torch

logger = logging.getLogger("neuroncompat.simulator")

_lock = threading.Lock()
_records: list["CompiledGraph"] = []
_listeners: list[Callable[["CompiledGraph"], None]] = []
# Frames skipped when looking for the line that triggered a compilation, and for the function
# compiled: ``neuroncompat simulate``'s recorder hooks every module call, so Dynamo inlines it.
_INTERNAL = (
    f"{os.sep}torch{os.sep}",
    f"neuroncompat{os.sep}simulator",
    f"neuroncompat{os.sep}simulate{os.sep}record.py",
    "<frozen ",
    f"{os.sep}contextlib.py",
)


@dataclass(frozen=True)
class InputSpec:
    """One graph input: shape (ints, or symbol names for dynamic dims) and dtype."""

    shape: tuple[int | str, ...] | None
    dtype: str
    dynamic: bool


@dataclass(frozen=True)
class CompiledGraph:
    """One compilation the real backend would perform."""

    signature: str
    inputs: tuple[InputSpec, ...]
    code: str
    trigger: str
    compile_id: str
    ops: int
    rank: int
    dynamic: bool = field(default=False)

    @property
    def rejected(self) -> bool:
        """The real backend rejects graphs with symbolic shapes ("dynamic=True is rejected")."""
        return self.dynamic

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["rejected"] = self.rejected
        return data


def _spec(value: Any) -> InputSpec:
    if isinstance(value, torch.Tensor):
        dims = tuple(d if isinstance(d, int) else str(d) for d in value.shape)
        return InputSpec(dims, str(value.dtype).removeprefix("torch."), any(isinstance(d, str) for d in dims))
    if isinstance(value, torch.SymInt):
        return InputSpec(None, "symint", True)
    return InputSpec(None, type(value).__name__, False)


def _input_specs(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> tuple[InputSpec, ...]:
    """Input specs from the traced placeholders (symbolic dims visible), else the examples."""
    placeholders = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    if placeholders and all(p is not None for p in placeholders):
        return tuple(_spec(p) for p in placeholders)
    return tuple(_spec(v) for v in example_inputs)


def _compiled_code() -> str:
    """The function Dynamo was compiling: ``file:line (name)``."""
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    codes = getattr(context, "traced_code", None) if context is not None else None
    for code in codes or ():
        if not any(part in code.co_filename for part in _INTERNAL):
            return f"{code.co_filename}:{code.co_firstlineno} ({code.co_name})"
    return "<unknown>"


def _trigger() -> str:
    """The innermost caller outside torch and the simulator: the line that ran the compiled code."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not any(part in filename for part in _INTERNAL):
            return f"{filename}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return "<unknown>"


def neuron_backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Record ``gm`` as one Neuron compilation and return it to run eagerly."""
    from torch._guards import CompileContext

    inputs = _input_specs(gm, example_inputs)
    dynamic = any(i.dynamic for i in inputs)
    digest = hashlib.sha1(gm.code.encode())
    digest.update(repr(inputs).encode())
    record = CompiledGraph(
        signature=digest.hexdigest()[:12],
        inputs=inputs,
        code=_compiled_code(),
        trigger=_trigger(),
        compile_id=str(CompileContext.current_compile_id()),
        ops=sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")),
        rank=int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0"))),
        dynamic=dynamic,
    )
    with _lock:
        _records.append(record)
        listeners = list(_listeners)
    for listener in listeners:
        listener(record)
    if dynamic:
        logger.warning(
            "graph %s (%s, called from %s) has dynamic shapes %s: the Neuron backend rejects it "
            "on hardware (set torch._dynamo.config.automatic_dynamic_shapes = False, or import "
            "neuroncompat)",
            record.signature,
            record.code,
            record.trigger,
            [i.shape for i in inputs],
        )
    return gm.forward


def compiles() -> list[CompiledGraph]:
    """Every graph compiled so far in this process, in order."""
    with _lock:
        return list(_records)


def reset_compiles() -> None:
    with _lock:
        _records.clear()


def on_compile(listener: Callable[[CompiledGraph], None]) -> Callable[[], None]:
    """Call ``listener`` with each new record, from inside the compilation; returns its remover.

    For observers that need what only the compiling call stack shows (``neuroncompat simulate``
    takes the user's own line that triggered the compile from it).
    """
    with _lock:
        _listeners.append(listener)

    def remove() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return remove


def register() -> None:
    """Register ``neuron`` with Dynamo once per process (Dynamo's registry is append-only).

    The simulator's own files join Dynamo's skip list, as torch's internals are: otherwise a
    graph break inside a compiled region (``model.compile()`` compiles ``Module._call_impl``,
    which breaks on hooks) lets Dynamo compile ``NeuronTensor.__torch_dispatch__`` frames as if
    they were user code, and the record fills with graphs of the simulator's bookkeeping.
    """
    from torch._dynamo import trace_rules
    from torch._dynamo.backends import registry

    if "neuron" not in registry._COMPILER_FNS:
        registry.register_backend(neuron_backend, name="neuron")
        trace_rules.add("neuroncompat.simulator")
