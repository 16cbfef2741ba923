"""One line of advice after the traceback of an uncaught error whose cause is where the script runs.

Two errors are the first a user meets when a script and the machine disagree about the device, and
neither says what to do:

- **off Neuron** (neither TorchNeuron nor the simulator), a migrated script dies of the missing
  ``torch.neuron`` (``AttributeError: module 'torch' has no attribute 'neuron'``) or of the
  ``neuron`` device, which torch does not know there (``RuntimeError: Expected one of cpu, cuda,
  ... device type at start of device string: neuron``, from ``.to("neuron")``,
  ``device="neuron:1"``, ``torch.device("neuron")``): the line says how to dry-run it on the
  simulated device;
- **on Neuron** without the CUDA redirect, a CUDA script dies of ``Torch not compiled with CUDA
  enabled`` (torch-neuronx's torch has no CUDA), or of whatever else a ``torch.cuda`` call raises
  there (``torch.cuda.set_device(rank)``: ``AttributeError: module 'torch._C' has no attribute
  '_cuda_setDevice'``; its traceback shows a frame of the user's code calling into ``torch/cuda/``):
  the line names the call site, ``NEURONCOMPAT_CUDA=redirect`` (run the script as written) and
  ``neuron-migrate`` (rewrite it for Neuron). A ``torch.cuda`` call made by a library is the
  library's business, not the script's, and gets no line.

``import neuroncompat`` wraps ``sys.excepthook`` (and ``python -m neuroncompat`` calls
:func:`advise` itself): after Python has printed the traceback of an uncaught exception, that
error, or one it chains, gets the line; every other error is left alone.

Why an exception hook and nothing earlier: the import must stay cheap and change nothing off
Neuron. Wrapping ``sys.excepthook`` is one assignment (no import, no torch), runs only when the
process is already dying of an uncaught exception, leaves the traceback and the exit status
exactly as they were, and chains to whatever hook was installed before. Giving ``torch`` a
``neuron`` attribute or a module ``__getattr__`` instead would change what ``hasattr(torch,
"neuron")`` answers, which libraries use to detect Neuron.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from types import TracebackType

from neuroncompat import environment

_on_neuron = False  # set by install(): which of the two errors this process can meet
_UNKNOWN_DEVICE = "device type at start of device string: neuron"
_NO_CUDA = ("Torch not compiled with CUDA enabled", "Found no NVIDIA driver on your system")


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, each once."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _no_neuron_here(exc: BaseException) -> str | None:
    """What is missing, where ``exc`` is the missing ``torch.neuron`` or the unknown ``neuron`` device."""
    if isinstance(exc, AttributeError) and getattr(exc, "name", None) == "neuron" and "'torch'" in str(exc):
        return "torch.neuron does not exist"
    if isinstance(exc, RuntimeError) and _UNKNOWN_DEVICE in str(exc):
        return "torch does not know the 'neuron' device"
    return None


def _no_cuda_here(exc: BaseException) -> bool:
    return isinstance(exc, (AssertionError, RuntimeError)) and any(text in str(exc) for text in _NO_CUDA)


def _script() -> str:
    return sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else "train.py"


def _off_neuron_hint(exc: BaseException | None) -> str | None:
    missing = next((found for e in _chain(exc) if (found := _no_neuron_here(e))), None)
    if missing is None:
        return None
    script = _script()
    return (
        f"neuroncompat: {missing}: no Neuron device (torch-neuronx) on this machine. "
        f"Dry-run the script on the simulated device: NEURONCOMPAT_SIMULATE=1 python -m neuroncompat {script} "
        f"(or neuroncompat simulate -- python {script})"
    )


def _cuda_call_site(exc: BaseException) -> str | None:
    """``"train.py:12 calls torch.cuda.set_device"`` where ``exc`` came out of a ``torch.cuda`` call in user code.

    The traceback's first step from a frame of the user's code (``neuroncompat.cuda.callers``' rule, the one the
    CUDA redirect uses) into a file under ``torch/cuda/``.
    """
    cuda_file = getattr(sys.modules.get("torch.cuda"), "__file__", None)
    if not cuda_file or not isinstance(exc, Exception):  # an interrupt is the user's doing, not CUDA's
        return None
    cuda_dir = os.path.dirname(os.path.realpath(cuda_file)) + os.sep
    from neuroncompat.cuda.callers import is_user_file

    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        caller, callee = tb.tb_frame.f_code, tb.tb_next.tb_frame.f_code
        if os.path.realpath(callee.co_filename).startswith(cuda_dir) and is_user_file(caller.co_filename):
            name = callee.co_name
            call = "torch.cuda" if name.startswith("_") or name == "<module>" else f"torch.cuda.{name}"
            return f"{os.path.basename(caller.co_filename)}:{tb.tb_lineno} calls {call}"
        tb = tb.tb_next
    return None


def _on_neuron_hint(exc: BaseException | None) -> str | None:
    redirect = sys.modules.get("neuroncompat.cuda")
    if exc is None or (redirect is not None and redirect.is_redirected()):
        return None  # the redirect is on: library code asked CUDA, and its answer is the truth
    site = next((found for e in _chain(exc) if (found := _cuda_call_site(e))), None)
    if site is None and not any(_no_cuda_here(e) for e in _chain(exc)):
        return None
    script = _script()
    simulate = "NEURONCOMPAT_SIMULATE=1 " if environment.flag("NEURONCOMPAT_SIMULATE") else ""
    uses = f"this script uses CUDA ({site})" if site else "this script uses CUDA"
    return (
        f"neuroncompat: {uses}, and this machine's accelerator is the NeuronCore (device 'neuron'). "
        f"Run it as written with the CUDA redirect: {simulate}NEURONCOMPAT_CUDA=redirect python -m neuroncompat {script}; "
        f"or rewrite it for Neuron: neuron-migrate {script} (shows the diff; --write applies it)"
    )


def advise(exc: BaseException | None) -> None:
    """Print the hint to stderr when ``exc`` (or an exception it chains) is one of the module docstring's errors."""
    hint = _on_neuron_hint(exc) if _on_neuron else _off_neuron_hint(exc)
    if hint is not None:
        print(hint, file=sys.stderr)


def install(on_neuron: bool) -> None:
    """Wrap ``sys.excepthook`` so an uncaught error of this machine's kind ends with its hint."""
    global _on_neuron
    _on_neuron = on_neuron
    previous = sys.excepthook
    if getattr(previous, "neuroncompat_hint", False):
        return

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        previous(kind, value, tb)
        advise(value)

    hook.neuroncompat_hint = True  # type: ignore[attr-defined]
    sys.excepthook = hook
