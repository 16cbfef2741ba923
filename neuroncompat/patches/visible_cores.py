"""``visible_cores``: an unaligned ``NEURON_RT_VISIBLE_CORES`` fails at once, with the valid choices.

Gap (docs/gaps.md#visible_cores): under the default logical-core size (LNC=2,
``NEURON_LOGICAL_NC_CONFIG`` unset or 2) the runtime only accepts sets of aligned physical-core
pairs ``{2k, 2k+1}``. accelerate copies ``--gpu_ids`` verbatim into the variable
(accelerate/utils/launch.py:149-150, :274-275, :546-547), so ``accelerate launch --gpu_ids 1,2``
yields ``1,2``, which fails deep in the runtime when torch initialises it (the PyTorch autoload
imports torch-neuronx during ``import torch``, torch/__init__.py:3017-3077). A script written for
GPUs may also set only ``CUDA_VISIBLE_DEVICES``, which the Neuron runtime ignores. The simulator
does not model the runtime's core allocation, so the runtime's own failure cannot be reproduced
there; the tests check the validation itself.

Fix: at ``import neuroncompat`` (environment only, before torch), parse the variable (commas and
ranges). An unaligned set under LNC=2, or an unparsable value, raises :class:`VisibleCoresError`
naming aligned choices (``0,1``, ``2,3``, ``0-3``). It is never rewritten: that would silently
change which cores run. The error is raised through ``Patch.fail`` (a :class:`PatchError`, the
shim's declared fail-fast): a bad core set must stop the script with this message at
``import neuroncompat`` (exit status 1) rather than later in the runtime. ``CUDA_VISIBLE_DEVICES`` set without
``NEURON_RT_VISIBLE_CORES``: a warning with the translation (GPU ``i`` -> cores ``2i, 2i+1``
under LNC=2, core ``i`` under LNC=1).

Example::

    NEURON_RT_VISIBLE_CORES=1,2 python train.py
    # before: a runtime error when torch initialises Neuron
    # after:  neuroncompat [visible_cores]: NEURON_RT_VISIBLE_CORES=1,2 is not a set of aligned core pairs ...
    #         Use 0,1 or 2,3 (one logical core each), 0-3 (two), or set NEURON_LOGICAL_NC_CONFIG=1.
"""

from __future__ import annotations

import os

from neuroncompat.patch import Patch, PatchError

ENV = "NEURON_RT_VISIBLE_CORES"
LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"
CUDA_ENV = "CUDA_VISIBLE_DEVICES"


class VisibleCoresError(PatchError):
    """``NEURON_RT_VISIBLE_CORES`` names a set the Neuron runtime will reject."""


def parse_cores(value: str) -> list[int]:
    """``"0,1"``, ``"0-3"``, ``"0-1,4-5"`` -> the core indices; ValueError when malformed."""
    cores: list[int] = []
    for part in value.replace(" ", "").split(","):
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"cannot parse {part!r}")
        start, end = int(first), int(last) if dash else int(first)
        if end < start:
            raise ValueError(f"range {part!r} runs backwards")
        cores.extend(range(start, end + 1))
    return cores


def _format(cores: list[int]) -> str:
    return (
        f"{cores[0]}-{cores[-1]}"
        if len(cores) > 2 and cores == list(range(cores[0], cores[-1] + 1))
        else ",".join(map(str, cores))
    )


def _lnc() -> int:
    raw = os.environ.get(LNC_ENV, "").strip()
    return int(raw) if raw.isdigit() else 2


class VisibleCores(Patch):
    id = "visible_cores"
    reason = "NEURON_RT_VISIBLE_CORES must be aligned core pairs under LNC=2: fail early with the valid choices"
    error = VisibleCoresError

    def activate(self) -> None:
        value = os.environ.get(ENV)
        if value is not None:
            self._validate(value)
        elif os.environ.get(CUDA_ENV, "").strip():
            self._translate_cuda(os.environ[CUDA_ENV])

    def _validate(self, value: str) -> None:
        try:
            cores = sorted(set(parse_cores(value)))
        except ValueError as exc:
            self.fail(f"{ENV}={value!r} is not a core list ({exc}); use e.g. 0,1 or 2,3 or 0-3")
        if _lnc() != 2:
            return
        unpaired = [c for c in cores if (c ^ 1) not in cores]
        if unpaired:
            choices = sorted({f"{2 * (c // 2)},{2 * (c // 2) + 1}" for c in cores})
            self.fail(
                f"{ENV}={value} is not a set of aligned core pairs: with {LNC_ENV} unset or 2 each logical "
                f"NeuronCore is the physical pair 2k,2k+1, and {', '.join(map(str, unpaired))} lack their partner. "
                f"Use {' or '.join(choices)} (one logical core each), 0-3 (two), or set {LNC_ENV}=1. "
                "(accelerate launch --gpu_ids copies its value into this variable verbatim.)"
            )

    def _translate_cuda(self, value: str) -> None:
        try:
            gpus = sorted(set(parse_cores(value)))
        except ValueError:
            self.warn(
                "%s=%s is ignored by the Neuron runtime, and it is not a list of indices to translate", CUDA_ENV, value
            )
            return
        cores = sorted(c for g in gpus for c in ((2 * g, 2 * g + 1) if _lnc() == 2 else (g,)))
        self.warn(
            "%s=%s is ignored by the Neuron runtime (every NeuronCore stays visible); the equivalent is %s=%s",
            CUDA_ENV,
            value,
            ENV,
            _format(cores),
        )
