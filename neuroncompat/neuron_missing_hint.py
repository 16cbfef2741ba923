"""One line of advice when a migrated script dies because ``torch.neuron`` does not exist here.

Migrated scripts call ``torch.neuron.*`` (the module torch-neuronx installs). Run with plain
``python`` on a machine without Neuron they stop with ``AttributeError: module 'torch' has no
attribute 'neuron'`` and nothing says that the simulator exists. So when ``import neuroncompat``
finds neither TorchNeuron nor the simulator, it wraps ``sys.excepthook`` (and ``python -m
neuroncompat`` calls :func:`advise` itself): after Python has printed the traceback of an
uncaught exception, that error, and only that one, gets a line on how to dry-run the script on
the simulated device.

Why an exception hook and nothing earlier: the import must stay cheap and change nothing off
Neuron. Wrapping ``sys.excepthook`` is one assignment (no import, no torch), runs only when the
process is already dying of an uncaught exception, leaves the traceback and the exit status
exactly as they were, and chains to whatever hook was installed before. Giving ``torch`` a
``neuron`` attribute or a module ``__getattr__`` instead would change what ``hasattr(torch,
"neuron")`` answers, which libraries use to detect Neuron.
"""

from __future__ import annotations

import sys
from types import TracebackType


def _missing_torch_neuron(exc: BaseException | None) -> bool:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, AttributeError) and getattr(exc, "name", None) == "neuron" and "'torch'" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def advise(exc: BaseException | None) -> None:
    """Print the hint to stderr when ``exc`` (or an exception it chains) is the missing ``torch.neuron``."""
    if not _missing_torch_neuron(exc):
        return
    script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else "train.py"
    print(
        "neuroncompat: torch.neuron does not exist: no Neuron device (torch-neuronx) on this machine. "
        f"Dry-run the script on the simulated device: NEURONCOMPAT_SIMULATE=1 python -m neuroncompat {script} "
        f"(or neuroncompat simulate -- python {script})",
        file=sys.stderr,
    )


def install() -> None:
    """Wrap ``sys.excepthook`` so an uncaught missing-``torch.neuron`` error ends with the hint."""
    previous = sys.excepthook
    if getattr(previous, "neuroncompat_hint", False):
        return

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        previous(kind, value, tb)
        advise(value)

    hook.neuroncompat_hint = True  # type: ignore[attr-defined]
    sys.excepthook = hook
