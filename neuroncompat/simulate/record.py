"""What one simulated process compiled: written as JSON when it exits, for ``neuroncompat simulate``.

Two kinds of compilation happen on Neuron and both are recorded:

- **torch.compile graphs**: the simulator's ``neuron`` backend sees each one (``simulator.compiles()``);
  a listener adds the user's own line that triggered it, which only the compiling stack shows.
- **eager shapes**: without torch.compile, Neuron still compiles the ops of a forward per new input
  shape (transformers #46590: "even in eager mode the graphs are compiled (op by op)"). The
  recorder counts the distinct (shape, dtype) signatures of the tensor inputs of each *outermost*
  module call on the device (the model the user or a trainer calls, not its layers: a new model
  input shape means new shapes for the whole forward), with where it was called from. Calls
  inside a torch.compile'd region are the compiled graphs' business and are skipped; a frame
  Dynamo gives up on (recompile limit) runs eagerly and is counted here, as on hardware. Calls
  during backward (activation checkpointing's recomputation) and on the CPU are not counted.

**Hub kernel replacements** are recorded too: each layer class that ``kernelize`` gave a Neuron
kernel's forward (:mod:`neuroncompat.simulator.hub_kernels`, which runs the layer's own forward),
with the kernel, its repo and how many layers it replaced.

More kinds of **finding** are recorded per (kind, what, site, user line), with a count:
graph breaks inside compiled code, from Dynamo's own report (:mod:`~neuroncompat.simulate.graph_breaks`);
data-dependent-shape ops, TorchNeuron CPU-fallback ops and ops making complex or float64 tensors on the
device, eager or in a graph (:mod:`~neuroncompat.simulate.op_findings`); int64 device inputs of compiled
graphs and of outermost module calls, by input name (:mod:`~neuroncompat.simulate.dtype_findings`).

Bounded: at most :data:`MAX_TENSORS` tensors per signature, :data:`MAX_SHAPES` signatures per call
site, :data:`MAX_SITES` call sites and :data:`MAX_FINDINGS` findings; beyond that only counts grow.
``neuroncompat simulate`` turns this on with ``NEURONCOMPAT_SIMULATE_RECORD=<dir>``; each process
writes ``rank<RANK>-<pid>.json`` there at exit (also on an uncaught exception, and on the SIGTERM
with which torchrun stops the other ranks when one fails).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import torch

from neuroncompat import environment
from neuroncompat.simulate import RECORD_ENV, graph_breaks
from neuroncompat.simulate.dtype_findings import GRAPH_INPUT
from neuroncompat.simulate.locations import current_caller, shorten_location
from neuroncompat.simulate.op_findings import OpWatcher
from neuroncompat.simulate.pipeline_calls import PipelineCalls
from neuroncompat.simulator import compile_backend, hub_kernels, observer
from neuroncompat.simulator.compile_backend import CompiledGraph
from neuroncompat.simulator.hub_kernels import KernelReplacement

MAX_TENSORS = 16
MAX_SHAPES = 64
MAX_SITES = 128
MAX_FINDINGS = 256

# One tensor input of a module call: (name, shape, dtype).
TensorSpec = tuple[str, tuple[int, ...], str]


def _signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[TensorSpec, ...], bool, list[str]]:
    """The tensor inputs of a call, named by position or keyword (containers are looked into
    twice), whether any of them is on the neuron device, and the names of those on it that are int64."""
    found: list[TensorSpec] = []
    on_device = False
    int64: list[str] = []

    def visit(name: str, value: Any, depth: int) -> None:
        nonlocal on_device
        if len(found) >= MAX_TENSORS:
            return
        if isinstance(value, torch.Tensor):
            found.append((name, tuple(value.shape), str(value.dtype).removeprefix("torch.")))
            on_device = on_device or value.device.type == "neuron"
            if value.dtype == torch.int64 and value.device.type == "neuron":
                int64.append(name)
        elif depth < 2 and isinstance(value, dict):
            for key in sorted(value, key=str):
                visit(f"{name}.{key}", value[key], depth + 1)
        elif depth < 2 and isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                visit(f"{name}.{index}", item, depth + 1)

    for index, value in enumerate(args):
        visit(f"args.{index}", value, 0)
    for key in sorted(kwargs):
        visit(key, kwargs[key], 0)
    return tuple(found), on_device, int64


def _on_device(module: torch.nn.Module) -> bool:
    parameter = next(module.parameters(), None)
    return parameter is not None and parameter.device.type == "neuron"


class _Site:
    """The distinct signatures of the outermost calls of one module class from one place."""

    __slots__ = ("calls", "shapes", "dropped")

    def __init__(self) -> None:
        self.calls = 0
        self.shapes: dict[tuple[TensorSpec, ...], int] = {}
        self.dropped = 0

    def add(self, signature: tuple[TensorSpec, ...]) -> None:
        self.calls += 1
        if signature in self.shapes:
            self.shapes[signature] += 1
        elif len(self.shapes) < MAX_SHAPES:
            self.shapes[signature] = 1
        else:
            self.dropped += 1


def _register_exit_hook(hook: Callable[..., None]) -> Callable[[], None]:
    """A global forward hook that sees keyword arguments and runs when a forward raises; returns its remover.

    torch 2.13's handle forgets the hook's ``with_kwargs`` flag when removed (it clears the hook and its
    ``always_call`` flag only), and ``torch.nn.modules.module._has_any_global_hook()`` reads that flag's table: after
    a recorder stopped, every later ``torch.compile(module)`` in the process would warn that global hooks exist.
    The remover clears the flag too; a torch that clears it itself finds nothing left to clear.
    """
    module = torch.nn.modules.module
    handle = module.register_module_forward_hook(hook, with_kwargs=True, always_call=True)

    def remove() -> None:
        handle.remove()
        module._global_forward_hooks_with_kwargs.pop(handle.id, None)

    return remove


class Recorder:
    """Records compiled graphs and eager forward shapes in this process (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # the SIGTERM writer may interrupt a holder on its own thread
        self._local = threading.local()
        self._graphs: list[tuple[CompiledGraph, str | None]] = []
        self._sites: dict[tuple[str, str | None, str | None], _Site] = {}
        self._dropped_calls = 0
        # (kind, what, site, user line, graph signature) -> times seen
        self._findings: dict[tuple[str, str, str | None, str | None, str | None], int] = {}
        self._dropped_findings = 0
        self._kernels: dict[KernelReplacement, int] = {}  # Hub kernel layer replacements -> layers replaced
        self._undo: list[Any] = []
        self._pipelines = PipelineCalls()

    def start(self) -> None:
        # torch warns that global hooks also fire for torch.compile's wrapper module: the hooks
        # skip that wrapper, and the warning would only confuse the user reading their run.
        warnings.filterwarnings(
            "ignore", message=r"Using `torch.compile\(module\)` when there are global hooks", category=UserWarning
        )
        hooks = torch.nn.modules.module
        self._undo = [
            hooks.register_module_forward_pre_hook(self._enter).remove,
            _register_exit_hook(self._exit),
            compile_backend.on_compile(self._compiled),
            graph_breaks.install(self._graph_break),
            hub_kernels.on_replace(self._kernel),
            self._pipelines.start(),
        ]
        observer.set_op_observer(OpWatcher(self._finding))
        compile_backend.track_graph_nodes(True)
        self._undo += [lambda: observer.set_op_observer(None), lambda: compile_backend.track_graph_nodes(False)]

    def stop(self) -> None:
        for undo in self._undo:
            undo()
        self._undo = []

    # -- hooks --------------------------------------------------------------------------------
    @staticmethod
    def _ignored(module: torch.nn.Module) -> bool:
        """Calls inside torch.compile (the compiled graphs cover them), the compiled wrapper
        itself, and calls during backward (activation-checkpoint recomputation is not a forward)."""
        return (
            torch.compiler.is_compiling()
            or compile_backend.is_compiled_module(module)
            or torch._C._current_graph_task_id() != -1
        )

    def _enter(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        if self._ignored(module):
            return
        self._local.depth = getattr(self._local, "depth", 0) + 1

    def _exit(self, module: torch.nn.Module, args: tuple[Any, ...], *rest: Any) -> None:
        # (kwargs, result) after a forward; (result,) when the forward raised.
        if self._ignored(module):
            return
        depth = self._local.depth = getattr(self._local, "depth", 1) - 1
        if depth == 0 and len(rest) == 2:
            signature, on_device, int64 = _signature(args, rest[0])
            if on_device or _on_device(module):  # a model kept on the CPU compiles nothing
                self._record_call(type(module).__qualname__, signature, int64)
                self._pipelines.on_eager(type(module).__qualname__, signature)

    def _record_call(self, module: str, signature: tuple[TensorSpec, ...], int64: list[str]) -> None:
        site_at, user_at = current_caller()
        for name in int64:
            self._finding("int64_on_device", name, site_at, user_at)
        key = (module, site_at, user_at)
        with self._lock:
            site = self._sites.get(key)
            if site is None:
                if len(self._sites) >= MAX_SITES:
                    self._dropped_calls += 1
                    return
                site = self._sites[key] = _Site()
            site.add(signature)

    def _compiled(self, graph: CompiledGraph) -> None:
        site_at, user_at = current_caller()
        with self._lock:
            self._graphs.append((graph, user_at))
        self._pipelines.on_graph(graph)
        for index, spec in enumerate(graph.inputs):
            if spec.dtype == "int64":
                self._finding("int64_on_device", f"{spec.name or f'#{index}'}{GRAPH_INPUT}", site_at, user_at)

    def _finding(
        self, kind: str, what: str, site_at: str | None, user_at: str | None, graph: str | None = None
    ) -> None:
        key = (kind, what, site_at, user_at, graph)
        with self._lock:
            if key in self._findings:
                self._findings[key] += 1
            elif len(self._findings) < MAX_FINDINGS:
                self._findings[key] = 1
            else:
                self._dropped_findings += 1

    def _graph_break(self, reason: str, site_at: str | None, user_at: str | None) -> None:
        self._finding("graph_break", reason, site_at, user_at)

    def _kernel(self, replacement: KernelReplacement) -> None:
        with self._lock:
            self._kernels[replacement] = self._kernels.get(replacement, 0) + 1

    # -- output -------------------------------------------------------------------------------
    def recorded(self) -> bool:
        """Whether anything compiled, ran a forward, was found or was allocated on the device in this process."""
        with self._lock:
            if self._graphs or self._sites or self._dropped_calls or self._findings or self._kernels:
                return True
        return device_allocations() > 0

    def snapshot(self) -> dict[str, Any]:
        """This process's record, in the form ``neuroncompat simulate`` reads back."""
        with self._lock:
            graphs = [
                {
                    **graph.to_dict(),
                    "trigger": shorten_location(graph.trigger),
                    "code": shorten_location(graph.code),
                    "user": user_at,
                }
                for graph, user_at in self._graphs
            ]
            eager = [
                {
                    "module": module,
                    "site": site_at,
                    "user": user_at,
                    "calls": site.calls,
                    "shapes": [
                        {"inputs": [{"name": n, "shape": list(s), "dtype": d} for n, s, d in signature], "calls": calls}
                        for signature, calls in site.shapes.items()
                    ],
                    "dropped_shapes": site.dropped,
                }
                for (module, site_at, user_at), site in self._sites.items()
            ]
            dropped = self._dropped_calls
            findings = [
                {"kind": kind, "what": what, "site": site_at, "user": user_at, "graph": graph, "count": count}
                for (kind, what, site_at, user_at, graph), count in self._findings.items()
            ]
            dropped_findings = self._dropped_findings
            kernels = [{**found.to_dict(), "layers": count} for found, count in self._kernels.items()]
        return {
            "rank": int(os.environ.get("RANK", "0")),
            "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
            "world_size": int(os.environ.get("WORLD_SIZE", "1")),
            "pid": os.getpid(),
            "argv": list(sys.argv),
            "compiled": graphs,
            "eager": eager,
            "dropped_calls": dropped,
            "findings": findings,
            "dropped_findings": dropped_findings,
            "hub_kernels": kernels,
            "pipelines": self._pipelines.snapshot(),
            "device_allocations": device_allocations(),
        }

    def write(self, directory: str | Path) -> Path:
        data = self.snapshot()
        path = Path(directory) / f"rank{data['rank']}-{data['pid']}.json"
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps(data))
        os.replace(partial, path)
        return path


def device_allocations() -> int:
    """Allocations made on this process's NeuronCores so far (the allocator's cumulative count, all cores).

    A script that only makes tensors and runs ops outside any module's forward compiles nothing and runs no
    forward, yet ran on the device: this count tells the report so.
    """
    try:
        cores = torch.accelerator.device_count()
        return sum(
            int(torch.accelerator.memory_stats(core).get("allocation.all.allocated", 0)) for core in range(cores)
        )
    except (AttributeError, RuntimeError):  # no simulated device in this process
        return 0


_recorder: Recorder | None = None


def start(directory: str | Path) -> Recorder:
    """Record this process from now on and write the record into ``directory`` when it exits.

    Once per process: a later call returns the running recorder. Forked children (DataLoader
    workers) inherit the exit handler but leave with ``os._exit``; the pid check keeps any other
    inheritor from writing the parent's record as its own. A process that ran nothing on the
    device and is no distributed rank (a launcher: ``accelerate launch`` runs under the shim)
    writes nothing; a rank always writes, so a missing rank means a killed one.
    """
    global _recorder
    if _recorder is not None:
        return _recorder
    recorder = _recorder = Recorder()
    recorder.start()
    pid = os.getpid()

    def write_at_exit() -> None:
        if os.getpid() == pid and (recorder.recorded() or "RANK" in os.environ):
            recorder.write(directory)

    atexit.register(write_at_exit)
    _write_on_sigterm(write_at_exit)
    return recorder


def _write_on_sigterm(write: Callable[[], None]) -> None:
    """When one rank fails, torchrun stops the others with SIGTERM, which skips exit handlers:
    write the record first, then die of the signal as before. Only where nobody handles SIGTERM."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        write()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, handler)


def start_from_env() -> None:
    """Start recording when ``neuroncompat simulate`` asked for it (``NEURONCOMPAT_SIMULATE_RECORD``)."""
    directory = environment.path(RECORD_ENV)
    if directory:
        start(directory)
