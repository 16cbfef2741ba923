"""The simulator's ``neuron`` torch.distributed backend: collectives over gloo on the CPU payloads.

On Trainium, ``init_process_group(backend="neuron")`` runs collectives over the Neuron fabric.
Here each rank is a process whose tensors live on ``neuron:{LOCAL_RANK}`` in host memory, so a
collective is the same gloo collective on CPU tensors over the same bytes (host views, from the C++
backend): gloo reduces in place, the device tensors see the result, and the caller gets a completed ``Work``
whose future holds the neuron tensors (what DDP's reducer and functional collectives read).
That is enough for DDP, FSDP2, accelerate's ``MULTI_NEURON``, the Trainer and DTensor tensor
parallelism to take their real code paths, with real data moving between ranks.

What gloo lacks is emulated: ``ReduceOp.AVG`` is a sum divided by the group size.
Non-contiguous tensors are reduced through a contiguous copy and written back.

Every collective waits for its gloo work before returning, with the GIL released (``Work.wait``).
That includes the coalesced forms c10d's functional collectives (DTensor, FSDP2) call, which
would otherwise go to gloo asynchronously: a gloo worker that drops the last reference to a
tensor with a Python object needs the GIL, and the main thread, holding it while it enqueues
the next collective, waits for that worker's queue lock, so both ranks hung (seen once in
about ten tensor-parallel generations).

Every collective's gloo ``Work`` and CPU tensors stay referenced from Python until the next
collective on the same group has completed, and the gloo group runs one worker thread. Gloo's
worker drops its references to a collective's tensors after the collective has completed; if it
dropped the last one, freeing the tensor's Python object needs the GIL. When that happened while
the main thread, holding the GIL, was destroying the group (``~ProcessGroupGloo`` joins its
workers; e.g. when a DDP model's reducer is freed as the script's globals are torn down after
``destroy_process_group()``), both waited for ever: a finished 2-rank DDP script hung at exit
about one run in eight under load (py-spy: the main thread in ``std::thread::join`` under
``~ProcessGroupGloo``, the worker in ``gil_scoped_acquire`` under ``~AsyncWork``). With one worker,
a completed later collective proves the worker has let go of the earlier one, so the main thread
always drops the last reference itself; the last collective's references live in a module-level
table, which outlives the group. ``bench/bench_distributed_stress.py`` counts such hangs.

Example (each rank, under ``torchrun --nproc_per_node=2 -m neuroncompat train.py``)::

    dist.init_process_group(backend="neuron")
    t = torch.full((2,), float(dist.get_rank()), device=f"neuron:{local_rank}")
    dist.all_reduce(t)          # tensor([1., 1.]) on both ranks
"""

from __future__ import annotations

import atexit
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future  # type: ignore[attr-defined]  # private, not in the stubs
from torch.futures import Future

BACKEND = "neuron"
# Per process group: the last collective's gloo Work and CPU tensors (see the module docstring).
# Module-level so they outlive the group's gloo backend, whose destructor joins its worker.
_last_collective: dict[int, tuple[Any, list[Any]]] = {}


class _Host:
    """CPU views of a collective's tensors, and the write-back for those gloo needs copied."""

    def __init__(self) -> None:
        self._copies: list[tuple[torch.Tensor, torch.Tensor]] = []

    def __call__(self, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return type(value)(self(v) for v in value)
        if not isinstance(value, torch.Tensor):
            return value
        cpu = host_view(value)
        if cpu.is_contiguous():
            return cpu
        copy = cpu.contiguous()
        self._copies.append((cpu, copy))
        return copy

    def write_back(self) -> None:
        for original, copy in self._copies:
            original.copy_(copy)


def host_view(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU tensor over a device tensor's bytes (the tensor itself when it is on the CPU)."""
    if tensor.device.type != BACKEND:
        return tensor
    view: torch.Tensor = torch.ops.neuroncompat_sim.host_view(tensor.detach())
    return view


def _flat(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat(v)]
    return []


def _done(result: Any) -> Any:
    future: Future = Future()
    future.set_result(result)
    return _create_work_from_future(future)


class NeuronProcessGroup(dist.ProcessGroup):
    """A process group whose collectives run gloo on the neuron tensors' CPU payloads."""

    def __init__(self, store: Any, rank: int, size: int, timeout: timedelta) -> None:
        # The stubs list only the (store, rank, size) constructor and omit gloo's _Options binding.
        super().__init__(rank, size)  # type: ignore[call-arg]
        options = dist.ProcessGroupGloo._Options()  # type: ignore[attr-defined]
        options._devices = [dist.ProcessGroupGloo.create_default_device()]
        options._timeout = timeout
        options._threads = 1  # collectives run one at a time here: one worker, in order (module docstring)
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("neuron-sim/", store), rank, size, options)
        # c10d keeps a group's name (DeviceMesh, functional collectives) on its backends. The
        # backend runs functional collectives' CPU kernels on host views of the device tensors, so
        # gloo is also the "cpu" backend, for any collective this class does not override.
        self._register_backend(torch.device(BACKEND), dist.ProcessGroup.BackendType.CUSTOM, self._gloo)
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, self._gloo)

    def getBackendName(self) -> str:
        return BACKEND

    def _run(self, method: str, outputs: Any, *args: Any, opts: Any = None, flat: bool = False) -> Any:
        """Run gloo's ``method`` on CPU views of ``args``; return a done Work holding ``outputs``.

        ``flat``: hand gloo 1-D views of the (contiguous) tensors, for its single-tensor gathers
        and scatters, which split the output buffer as a flat array and reject any other shape.
        """
        host = _Host()
        cpu_args = [host(a) for a in args]
        if flat:
            cpu_args = [a.view(-1) if isinstance(a, torch.Tensor) else a for a in cpu_args]
        divide = opts is not None and getattr(opts, "reduceOp", None) == dist.ReduceOp.AVG
        if divide:
            opts.reduceOp = dist.ReduceOp.SUM
        work = getattr(self._gloo, method)(*cpu_args, *([opts] if opts is not None else []))
        work.wait()
        # Replacing the previous entry frees the previous collective here, on this thread.
        _last_collective[id(self)] = (work, cpu_args)
        host.write_back()
        if divide:
            for tensor in _flat(outputs):
                tensor.div_(self.size())
        return _done(outputs)

    # -- reductions -------------------------------------------------------------------------
    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        return self._run("allreduce", tensors, tensors, opts=opts)

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        return self._run("allreduce_coalesced", tensors, tensors, opts=opts)

    def reduce(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        return self._run("reduce", tensors, tensors, opts=opts)

    def reduce_scatter(self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]], opts: Any = None) -> Any:
        return self._run("reduce_scatter", outputs, outputs, inputs, opts=opts)

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> Any:
        return self._run("_reduce_scatter_base", output, output, input, opts=opts, flat=True)

    def reduce_scatter_single_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None
    ) -> Any:
        for output, input in zip(outputs, inputs, strict=True):
            self.reduce_scatter_single(output, input, opts)
        return _done(outputs)

    # -- gathers and broadcasts --------------------------------------------------------------
    def allgather(self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any = None) -> Any:
        return self._run("allgather", outputs, outputs, inputs, opts=opts)

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> Any:
        return self._run("_allgather_base", output, output, input, opts=opts, flat=True)

    def all_gather_single_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None
    ) -> Any:
        for output, input in zip(outputs, inputs, strict=True):
            self.all_gather_single(output, input, opts)
        return _done(outputs)

    def allgather_coalesced(
        self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any = None
    ) -> Any:
        return self._run("allgather_coalesced", outputs, outputs, inputs, opts=opts)

    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        return self._run("broadcast", tensors, tensors, opts=opts)

    def gather(self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any = None) -> Any:
        return self._run("gather", outputs, outputs, inputs, opts=opts)

    def scatter(self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]], opts: Any = None) -> Any:
        return self._run("scatter", outputs, outputs, inputs, opts=opts)

    def alltoall(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None) -> Any:
        return self._run("alltoall", outputs, outputs, inputs, opts=opts)

    def all_to_all_single(
        self,
        output: torch.Tensor,
        input: torch.Tensor,
        output_splits: list[int],
        input_splits: list[int],
        opts: Any = None,
    ) -> Any:
        return self._run("alltoall_base", output, output, input, output_splits, input_splits, opts=opts)

    # -- point to point and synchronisation --------------------------------------------------
    def send(self, tensors: list[torch.Tensor], dst: int, tag: int = 0) -> Any:
        return self._run("send", tensors, tensors, dst, tag)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int = 0) -> Any:
        return self._run("recv", tensors, tensors, src, tag)

    def barrier(self, opts: Any = None) -> Any:
        return self._run("barrier", [], opts=opts)

    def monitored_barrier(self, opts: Any = None, wait_all_ranks: bool = False) -> Any:
        return self.barrier()


def _create(store: Any, rank: int, size: int, timeout: timedelta) -> NeuronProcessGroup:
    return NeuronProcessGroup(store, rank, size, timeout)


def _destroy_at_exit() -> None:
    """Tear the process groups down before the interpreter does.

    Scripts often end without ``destroy_process_group()`` (the Trainer and TRL never call it).
    Left to interpreter shutdown, the gloo threads behind this group can be torn down in an
    order that aborts the process ("terminate called without an active exception") after the
    script has finished, so torchrun reports a failed rank.
    """
    if dist.is_initialized():
        dist.destroy_process_group()


def register() -> None:
    """Make ``backend="neuron"`` (and the default backend for neuron tensors) this group, once."""
    if BACKEND not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND, _create, devices=[BACKEND])
        atexit.register(_destroy_at_exit)
