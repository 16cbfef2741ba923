"""The largest single tensors a traced step makes: which op made each, its shape and dtype, and in which phase.

A peak by category says what kind of memory is short; the largest tensors say which line of the model to look
at (a vocabulary-sized logits tensor, an attention matrix). A dispatch mode sees every op's outputs on fake
tensors at no cost beyond the trace, so it keeps a running top-N, one row per distinct (op, shape, dtype,
phase) with how many times that op made one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

KEEP = 8


@dataclass
class Made:
    """Tensors of one (op, shape, dtype, phase): the bytes of one, and how many the step made."""

    op: str
    shape: tuple[int, ...]
    dtype: str
    phase: str
    nbytes: int
    count: int = 1


def local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's part of a tensor: a DTensor's local shard (what the rank holds), else the tensor itself."""
    from torch.distributed.tensor import DTensor

    return tensor._local_tensor if isinstance(tensor, DTensor) else tensor


class LargestTensors(TorchDispatchMode):
    """Records each op's output tensors by size while entered; :meth:`top` gives the largest kinds."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = ""
        self._made: dict[tuple[str, tuple[int, ...], str, str], Made] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func.is_view or torch.Tag.inplace_view in func.tags:  # a view makes no new memory
            return out
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor):
                self._record(str(func.overloadpacket.__name__), tensor)
        return out

    def _record(self, op: str, tensor: torch.Tensor) -> None:
        tensor = local(tensor)
        shape = tuple(int(size) for size in tensor.shape)
        key = (op, shape, str(tensor.dtype).removeprefix("torch."), self.phase)
        made = self._made.get(key)
        if made is not None:
            made.count += 1
            return
        self._made[key] = Made(*key, nbytes=tensor.numel() * tensor.element_size())
        if len(self._made) > 4 * KEEP:  # bound the table: drop the smaller kinds
            kept = sorted(self._made.values(), key=lambda m: m.nbytes, reverse=True)[: 2 * KEEP]
            self._made = {(m.op, m.shape, m.dtype, m.phase): m for m in kept}

    def top(self, n: int = 5) -> list[Made]:
        """The ``n`` largest kinds of tensor the step made, largest first."""
        return sorted(self._made.values(), key=lambda m: m.nbytes, reverse=True)[:n]
