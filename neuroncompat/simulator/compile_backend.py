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
import inspect
import logging
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import CodeType, FrameType
from typing import Any

import torch

logger = logging.getLogger("neuroncompat.simulator")

_lock = threading.Lock()
_records: list[CompiledGraph] = []
_listeners: list[Callable[[CompiledGraph], None]] = []
_running = threading.local()
# Dynamo compiles the code after a graph break as a "resume" function named after the original.
_RESUME = re.compile(r"torch_dynamo_resume_in_(?P<name>.+)_at_(?P<line>\d+)$")
_track_nodes = False
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
    """One graph input: shape (ints, or symbol names for dynamic dims), dtype, and what it is in
    the user's code: ``name`` as Dynamo's source reads it (``input_ids``, ``self.model.embed.weight``),
    ``parameter`` for a module's parameters and buffers (the same every call: not worth showing)."""

    shape: tuple[int | str, ...] | None
    dtype: str
    dynamic: bool
    name: str | None = None
    parameter: bool = False


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


def _spec(value: Any, name: str | None = None, parameter: bool = False) -> InputSpec:
    if isinstance(value, torch.Tensor):
        dims = tuple(d if isinstance(d, int) else str(d) for d in value.shape)
        dynamic = any(isinstance(d, str) for d in dims)
        return InputSpec(dims, str(value.dtype).removeprefix("torch."), dynamic, name, parameter)
    if isinstance(value, torch.SymInt):
        return InputSpec(None, "symint", True, name)
    return InputSpec(None, type(value).__name__, False, name)


# Dynamo's source names, ``L['self']._modules['model']._parameters['weight']``, read as Python:
# ``self.model.weight``; ``L[...]`` are the frame's locals, ``G[...]`` its globals.
_SOURCE_ROOT = re.compile(r"\b[LG]\['([^']+)'\]")
_SOURCE_MEMBER = re.compile(r"\._(?:modules|parameters|buffers)\['([^']+)'\]")
_SOURCE_KEY = re.compile(r"\['([^']+)'\]")
_KWARG = re.compile(r"^kwargs\[([^\]]+)\]")  # a keyword argument: input_ids, not kwargs[input_ids]


def _source_name(node: torch.fx.Node) -> tuple[str | None, bool]:
    """The user-level name of a graph input and whether it is a module parameter or buffer."""
    grapharg = node.meta.get("grapharg")
    source = getattr(grapharg, "source", None)
    source_name = getattr(source, "name", None)
    raw = source_name if isinstance(source_name, str) else None
    if raw is None:
        return node.name, False
    example = getattr(grapharg, "example", None)
    parameter = "._parameters[" in raw or "._buffers[" in raw or isinstance(example, torch.nn.Parameter)
    name = _SOURCE_KEY.sub(r"[\1]", _SOURCE_MEMBER.sub(r".\1", _SOURCE_ROOT.sub(r"\1", raw)))
    return _KWARG.sub(r"\1", name), parameter


def _input_specs(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> tuple[InputSpec, ...]:
    """Input specs from the traced placeholders (symbolic dims visible, named), else the examples."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if placeholders and all(p.meta.get("example_value") is not None for p in placeholders):
        return tuple(_spec(p.meta["example_value"], *_source_name(p)) for p in placeholders)
    return tuple(_spec(v) for v in example_inputs)


def _pass_through(code: CodeType) -> bool:
    """A decorator's wrapper (``def wrapper(*args, **kwargs)`` in a library): the function it wraps
    names the graph better (``Qwen3ForCausalLM.forward``, not transformers' ``wrapper``)."""
    from neuroncompat.simulate.locations import is_library

    flags = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
    return code.co_flags & flags == flags and is_library(code.co_filename)


def _describe_code(code: CodeType) -> str:
    name = getattr(code, "co_qualname", code.co_name)
    resumed = _RESUME.search(name)
    if resumed:
        name = f"{resumed['name']}, after the graph break at line {resumed['line']}"
    return f"{code.co_filename}:{code.co_firstlineno} ({name})"


def _compiled_code(gm: torch.fx.GraphModule) -> str:
    """The function Dynamo was compiling, ``file:line (qualified name)``: the outermost function of
    the graph's source stack that is neither torch's nor the simulator's, looking through decorator
    wrappers; else the first such function Dynamo traced."""
    from torch._guards import TracingContext

    from neuroncompat.simulate.locations import frames_in

    context = TracingContext.try_get()
    codes = getattr(context, "traced_code", None) if context is not None else None
    candidates = [code for code in codes or () if not any(part in code.co_filename for part in _INTERNAL)]
    trace = next((n.meta["stack_trace"] for n in gm.graph.nodes if n.meta.get("stack_trace")), "")
    for filename, line, function in frames_in(trace):  # outermost first
        # the traced function of that name whose body holds the line: the nearest def above it
        matches = [
            c for c in candidates if c.co_filename == filename and c.co_name == function and c.co_firstlineno <= line
        ]
        code = max(matches, key=lambda c: c.co_firstlineno, default=None)
        if code is not None and not _pass_through(code):
            return _describe_code(code)
    for code in [c for c in candidates if not _pass_through(c)] or candidates:
        return _describe_code(code)
    return "<unknown>"


def _trigger() -> str:
    """The innermost caller outside torch and the simulator: the line that ran the compiled code."""
    frame: FrameType | None = sys._getframe(1)
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
        code=_compiled_code(gm),
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
    return _runner(gm, record)


class _NodeTracker(torch.fx.Interpreter):
    """Runs a graph node by node, telling :func:`running_graph` which node is running."""

    def run_node(self, n: torch.fx.Node) -> Any:
        _running.node = n
        return super().run_node(n)


def _runner(gm: torch.fx.GraphModule, record: CompiledGraph) -> Callable[..., Any]:
    """``gm.forward``, marked as a run of ``record``; the first run goes node by node when an
    observer asked for it (:func:`track_graph_nodes`), so an op seen in it has its source line."""
    first = True

    def run(*args: Any) -> Any:
        nonlocal first
        outer = getattr(_running, "graph", None), getattr(_running, "node", None)
        _running.graph, _running.node = record, None
        try:
            if first and _track_nodes:
                first = False
                return _NodeTracker(gm).run(*args)
            first = False
            return gm.forward(*args)
        finally:
            _running.graph, _running.node = outer

    return run


def track_graph_nodes(on: bool) -> None:
    """Run each new graph's first call node by node (see :func:`running_graph`)."""
    global _track_nodes
    _track_nodes = on


def running_graph() -> tuple[CompiledGraph | None, torch.fx.Node | None]:
    """The compiled graph running on this thread, if any, and during its tracked first run the
    node running (its ``meta["stack_trace"]`` is the source line the op came from)."""
    return getattr(_running, "graph", None), getattr(_running, "node", None)


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
