"""The ``neuron`` torch.compile backend of the simulator: it records every graph, then runs it.

On Trainium each distinct graph costs a Neuron compilation (about a minute, per the TRL guide),
so the record is what a dry run is for: ``simulator.compiles()`` lists each graph with its input
shapes and dtypes, a stable signature, and the source line that triggered it.

The arguments behave as TorchNeuron's torch.compile reference documents them
(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html):

* ``backend``: "'neuron'. Explicitly set, or auto-selected when running on a Neuron device". The
  simulator makes :func:`auto_backend` Dynamo's default (``set_default_backend``): a graph whose
  inputs live on the ``neuron`` device, or that makes a ``neuron`` tensor (a factory call with
  ``device="neuron"``), goes to ``neuron``, any other graph to inductor as before.
  Whether TorchNeuron also sends a CPU-only graph to ``neuron`` is not documented; choosing by the
  graph's device is right for every graph that touches the device, under either reading.
* ``mode``: "Other modes log a warning and fall back to default": a warning, once per mode.
* ``options``: "Accepts a dict or None, but only a few keys are read": any dict is accepted;
  ``fallback_execution`` is the one read here (the env-vars page documents it).
* ``dynamic=True`` "is rejected during compilation": the compile raises, unless fallback
  execution is on (``options={"fallback_execution": True}`` or
  ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0``; its default is 1), which runs the graph eagerly.
* ``dynamic`` unset: the reference says "Shapes that vary between steps run, recompiling per new
  shape", while TRL #7660 reports Dynamo's automatic-dynamic graphs rejected. Which holds is
  unknown, so such a graph runs, is marked ``rejected`` in the record and warned about; the shim's
  ``dynamic_shapes`` patch (automatic dynamic shapes off) is right under both readings.
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
from types import CodeType, FrameType, ModuleType
from typing import Any

import torch

# At module level, never inside a function: after the ``NEURONCOMPAT_SIMULATE`` autoload the ``neuroncompat``
# package is out of ``sys.modules`` (so that the script's own ``import neuroncompat`` starts the shim), and a
# submodule imported later would run the package's ``__init__`` again and start every patch in a script that
# never asked for them (tests/test_simulator_autoload.py).
from neuroncompat import hooks
from neuroncompat.simulate.locations import frames_in, is_library

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
        """A graph with symbolic shapes: refused for ``dynamic=True``, disputed for automatic dynamic (see above)."""
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


def _fallback_execution(options: dict[str, Any]) -> bool:
    """Whether a graph the backend refuses runs eagerly instead: the ``fallback_execution`` option, else
    ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION`` (default 1: the error is raised)."""
    if "fallback_execution" in options:
        return bool(options["fallback_execution"])
    return os.environ.get("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "1").strip() in ("0", "false", "False")


_warned_modes: set[str] = set()


def neuron_backend(
    gm: torch.fx.GraphModule, example_inputs: list[Any], mode: str | None = None, options: dict[str, Any] | None = None
) -> Callable[..., Any]:
    """Record ``gm`` as one Neuron compilation and return it to run eagerly.

    ``mode`` and ``options`` are what ``torch.compile`` passes a named backend; ``dynamic=True`` reaches
    a backend only as Dynamo's ``assume_static_by_default=False`` during the compile.
    """
    from torch._guards import CompileContext

    if options is not None and not isinstance(options, dict):
        raise TypeError(f"torch.compile(options=...) for the neuron backend takes a dict or None, not {type(options)}")
    if mode not in (None, "default") and mode not in _warned_modes:
        _warned_modes.add(mode)
        logger.warning(
            "torch.compile(mode=%r): the neuron backend supports only the default mode; falling back to it", mode
        )
    requested_dynamic = not torch._dynamo.config.assume_static_by_default

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
    if dynamic and requested_dynamic and not _fallback_execution(options or {}):
        raise RuntimeError(
            f"graph {record.signature} ({record.code}, called from {record.trigger}): torch.compile(dynamic=True) is "
            "rejected during compilation by the neuron backend; compile with dynamic=False (or leave it unset), or "
            "pass options={'fallback_execution': True} to run the graph eagerly"
        )
    if dynamic:
        logger.warning(
            "graph %s (%s, called from %s) has dynamic shapes %s: %s (set torch._dynamo.config."
            "automatic_dynamic_shapes = False, or import neuroncompat)",
            record.signature,
            record.code,
            record.trigger,
            [i.shape for i in inputs],
            "dynamic=True, run eagerly by fallback execution"
            if requested_dynamic
            else "TorchNeuron documents a recompile per new shape, TRL #7660 reports such graphs rejected",
        )
    return _runner(gm, record)


def _touches_neuron(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> bool:
    """The graph takes a ``neuron`` tensor, or makes one: ``create_block_mask`` (flex attention's mask, which
    transformers compiles with no backend) gets only ``device="neuron"`` and builds its tensors inside the
    graph, which inductor cannot lower either."""
    tensors = [*example_inputs, *gm.parameters(), *gm.buffers()]
    for node in gm.graph.nodes:
        value = node.meta.get("example_value", node.meta.get("val"))
        tensors.extend(value if isinstance(value, (tuple, list)) else [value])
    return any(isinstance(t, torch.Tensor) and t.device.type == "neuron" for t in tensors)


def auto_backend(
    gm: torch.fx.GraphModule, example_inputs: list[Any], mode: str | None = None, options: dict[str, Any] | None = None
) -> Callable[..., Any]:
    """Dynamo's default backend under the simulator: ``neuron`` for a graph on the device, inductor otherwise."""
    if _touches_neuron(gm, example_inputs):
        return neuron_backend(gm, example_inputs, mode=mode, options=options)
    inductor = torch._TorchCompileInductorWrapper(mode, options, not torch._dynamo.config.assume_static_by_default)
    return inductor(gm, example_inputs)


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
    """Forget every recorded graph, and which modes were warned about (a fresh start warns again)."""
    with _lock:
        _records.clear()
        _warned_modes.clear()


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


def is_compiled_module(module: object) -> bool:
    """Whether ``module`` is ``torch.compile``'s wrapper (``OptimizedModule``), without importing Dynamo (about
    1.5 s of CPU) in a process that never compiled: until Dynamo is imported, no module can be one."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return eval_frame is not None and isinstance(module, eval_frame.OptimizedModule)


def register() -> None:
    """Register ``neuron`` with Dynamo as soon as Dynamo is imported (now, if it already is).

    Importing ``torch._dynamo`` costs about 1.5 s of CPU (sympy, FX's symbolic shapes); the simulator turns on
    as torch imports (the autoload), in every process of a run, most of which never compile. ``torch.compile``,
    ``list_backends`` and every other way to reach a backend import Dynamo first, so a post-import hook
    registers ``neuron`` before any lookup can miss it.
    """
    hooks.when_imported("torch._dynamo", _register_with_dynamo, keep=True)


def _register_with_dynamo(_dynamo: ModuleType) -> None:
    """Register ``neuron`` with Dynamo once per process (Dynamo's registry is append-only).

    The simulator's own files join Dynamo's skip list, as torch's internals are: otherwise a
    graph break inside a compiled region (``model.compile()`` compiles ``Module._call_impl``,
    which breaks on hooks) lets Dynamo compile the simulator's Python frames (``torch.neuron``'s
    functions, the process group) as if they were user code, and the record fills with graphs
    of the simulator's bookkeeping.
    """
    from torch._dynamo import trace_rules
    from torch._dynamo.backends import registry

    if "neuron" not in registry._COMPILER_FNS:
        registry.register_backend(neuron_backend, name="neuron")
        trace_rules.add("neuroncompat.simulator")
    if registry.get_default_backend() == "inductor":
        registry.set_default_backend(auto_backend)
