"""A tensor's value read during the traced step: answered where a library reads it for its bookkeeping, else the
place the plan stops.

A fake tensor has a shape and no values, so ``.item()``, ``bool(tensor)``, ``.tolist()`` and ops whose output
shape depends on values (``nonzero``, boolean indexing) cannot run on one. Where the script's own line does that,
the plan cannot know which way the script would go, so it stops and names that line. A few reads in the libraries'
training loops only decide bookkeeping, and the way a healthy first step goes is known; those are answered, and
the report lists each answer, so nothing is assumed silently. The table is short on purpose: a read is added only
once the code around it has been read and the answer is the one a finite, ordinary step gives.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

# (the file's path ending, the function's qualified name) -> what the read decides, and the answer (False / 0)
ANSWERED = {
    ("transformers/trainer.py", "Trainer._run_epoch"): (
        "Trainer's logging_nan_inf_filter asks whether the loss is nan or inf; answered no (a finite loss)"
    ),
    ("transformers/generation/utils.py", "StopCheck.__call__"): (
        "generate asks whether every sequence has finished after the prefill; answered no (the first decode step "
        "runs, as it does unless every sequence ends at its first token)"
    ),
}
# frames of these packages are the machinery between a read and the line that asked for it
MACHINERY = (str(Path(torch.__file__ or "torch").parent), str(Path(__file__).parent))


class ScriptStop(BaseException):
    """Raised into the user's script to end it: the step is traced (``reason`` None) or cannot be (the reason,
    naming the script's line). A BaseException, so the script's own ``except Exception`` does not swallow it."""

    def __init__(self, reason: str | None = None) -> None:
        super().__init__(reason or "the planned step is traced")
        self.reason = reason


@dataclass(frozen=True)
class Answered:
    """One value read the plan answered: where, and what it decided."""

    site: str
    why: str


def reader() -> Any:
    """The innermost frame outside torch and the plan: the line that read the value."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(MACHINERY):
        frame = frame.f_back  # type: ignore[assignment]
    return frame


def site(frame: Any) -> str:
    """``file:line`` of ``frame``, a library's file named from its package (``transformers/trainer.py:1911``)."""
    path = frame.f_code.co_filename.replace("\\", "/")
    return f"{path.rpartition('-packages/')[2]}:{frame.f_lineno}"


def script_line(script: Path, frame: Any) -> str | None:
    """``script``'s innermost line on the stack from ``frame`` outwards (None when the script is not on it)."""
    while frame is not None:
        if Path(frame.f_code.co_filename).resolve() == script:
            return f"{script.name}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def stopped_at(script: Path, frame: Any, why: str) -> str:
    """The sentence a stop gives: the script's line first, the library line that did it when different."""
    at = script_line(script, frame)
    inner = site(frame) if frame is not None else None
    if at is None:
        return f"{inner}: {why}" if inner else why
    return f"{at}: {why}" + (f" (at {inner})" if inner and not inner.startswith(str(script)) else "")


class ValueReads(TorchDispatchMode):
    """Answers the allowed reads of fake values (:data:`ANSWERED`) and stops the script at any other."""

    def __init__(self, script: Path) -> None:
        super().__init__()
        self.script = script
        self.answered: list[Answered] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        try:
            return func(*args, **(kwargs or {}))
        except (DataDependentOutputException, DynamicOutputShapeException):
            frame = reader()
            why = self._allowed(frame)
            fake = [t for t in tree_flatten(args)[0] if isinstance(t, FakeTensor)]
            if why is not None and func is torch.ops.aten._local_scalar_dense.default and fake:
                if Answered(site(frame), why) not in self.answered:
                    self.answered.append(Answered(site(frame), why))
                return False if fake[0].dtype == torch.bool else 0
            raise ScriptStop(
                stopped_at(
                    self.script,
                    frame,
                    f"reads a tensor's value ({func.overloadpacket.__name__}: .item(), bool(), .tolist(), or an op "
                    "whose output shape depends on values), which the plan's fake tensors do not have",
                )
            ) from None

    @staticmethod
    def _allowed(frame: Any) -> str | None:
        if frame is None:
            return None
        path = frame.f_code.co_filename.replace("\\", "/")
        qualname = getattr(frame.f_code, "co_qualname", None)  # Python 3.11; 3.10 has the bare name only
        for (ending, function), why in ANSWERED.items():
            named = qualname == function if qualname else frame.f_code.co_name == function.rpartition(".")[2]
            if path.endswith(ending) and named:
                return why
        return None
