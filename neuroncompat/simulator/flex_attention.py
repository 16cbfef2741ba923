"""FlexAttention accepts ``neuron`` tensors, as TorchNeuron 2.34 documents ("FlexAttention runs faster with
more masks": it runs on Neuron).

Stock PyTorch 2.13 refuses any device outside its list before computing anything:
``torch.nn.attention.flex_attention._validate_device`` raises "FlexAttention is only supported on CUDA, CPU,
HPU, or MPS devices. Found input tensors on neuron device." for every PrivateUse1 backend, eager or under
``torch.compile`` (Dynamo traces the check). torch-neuronx has to lift that check for its device; how it does
so is not documented. The simulator lets ``neuron`` tensors through the check, and nothing else: the
attention itself is PyTorch's (the flex ``HigherOrderOperator``'s dense implementation, forward and backward,
run by the simulator's ``neuron`` compile backend or by flex attention's own eager path), so the numbers are
the CPU's. Other devices keep PyTorch's check, CPU backward refusal included.
"""

from __future__ import annotations

from typing import Any

# at module level: see compile_backend.py on why the simulator never imports a neuroncompat module lazily
from neuroncompat import hooks

_original: list[Any] = []
_wanted: list[bool] = []  # install() asked and uninstall() did not take it back


def _validate_device(query: Any, key: Any, value: Any) -> None:
    if query.device.type == "neuron":
        return None
    return _original[0](query, key, value)


def install() -> None:
    """Wrap the device check once flex attention is imported (now, if it is); :func:`uninstall` restores it.

    Not before: ``torch.nn.attention.flex_attention`` imports Dynamo (about 1.5 s of CPU) and the simulator turns
    on in every process of a run as torch imports; a script that uses flex attention imports it first.
    """
    if not _wanted:
        _wanted.append(True)
    hooks.when_imported("torch.nn.attention.flex_attention", _wrap, keep=True)


def _wrap(flex_attention: Any) -> None:
    """Wrap the device check (idempotent), unless :func:`uninstall` came first."""
    import torch._dynamo

    if _original or not _wanted:
        return
    _original.append(flex_attention._validate_device)
    # This file is on Dynamo's skip list with the rest of the simulator: trace into the check, as into
    # PyTorch's own, so that compiling flex attention stays one graph (flex_attention's fullgraph compile).
    flex_attention._validate_device = torch._dynamo.dont_skip_tracing(_validate_device)


def uninstall() -> None:
    _wanted.clear()
    if _original:
        from torch.nn.attention import flex_attention

        flex_attention._validate_device = _original.pop()
