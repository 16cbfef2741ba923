"""The simulator's ``neuron`` process group in one process (world size 1), for what needs no peer.

The exit hang of finished multi-rank scripts came from gloo's worker thread freeing a collective's
tensors: freeing a tensor's Python object needs the GIL, and the main thread held it while
destroying the group (``~ProcessGroupGloo`` joins the worker). The group must free every
collective's tensors on the calling thread; ``bench/bench_distributed_stress.py`` counts the hangs
over real 2-rank launches.
"""

from __future__ import annotations

import datetime
import threading
import weakref
from pathlib import Path

import pytest
import torch
import torch.distributed as dist


def test_collective_tensors_are_freed_on_the_calling_thread(
    neuron: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neuroncompat.simulator import distributed

    freed_on: list[int] = []

    def watched_host_view(tensor: torch.Tensor) -> torch.Tensor:
        # the CPU tensors handed to gloo: the Python objects its worker thread could drop last
        view = host_view(tensor)
        weakref.finalize(view, lambda: freed_on.append(threading.get_ident()))
        return view

    host_view = distributed.host_view
    monkeypatch.setattr(distributed, "host_view", watched_host_view)
    group = distributed.NeuronProcessGroup(
        dist.FileStore(str(tmp_path / "store"), 1), 0, 1, datetime.timedelta(seconds=60)
    )
    rounds = 400
    for _ in range(rounds):
        t = torch.ones(8, device="neuron")
        group.allreduce([t])
        del t
    assert len(freed_on) >= rounds - 1, "the payloads of finished collectives must be freed"
    off_main = [ident for ident in freed_on if ident != threading.get_ident()]
    assert not off_main, f"{len(off_main)} of {len(freed_on)} collectives' tensors were freed by gloo's worker thread"
