"""``visible_cores``: a ``NEURON_RT_VISIBLE_CORES`` that cannot work fails at once, with the documented reason.

Gap (docs/gaps.md#visible_cores): the Neuron runtime takes a core index, a list or a range of logical
NeuronCores that must be contiguous and increasing (``0``, ``0,1``, ``0-3``; not ``0-1,4-5``), and the TRL
Trainium guide adds that ``1,2`` does not work while ``0,1``, ``2,3`` and ``0-3`` do. accelerate copies
``--gpu_ids`` verbatim into the variable (accelerate/utils/launch.py:149-150, :274-275, :546-547), so
``accelerate launch --gpu_ids 1,2`` yields ``1,2``; on hardware a bad set fails in the runtime, when torch
loads torch-neuronx (the PyTorch autoload, torch/__init__.py:3017-3077). A script written for GPUs may also
set only ``CUDA_VISIBLE_DEVICES``, which the Neuron runtime ignores. The simulator refuses the sets the
runtime documents as invalid as it starts (``neuroncompat.simulator``); ``1,2``'s failure (collectives, per
the TRL guide) is not imitated there.

Fix: at ``import neuroncompat`` (environment only, before torch; under the simulator, before the simulated
device starts), check the variable against :mod:`neuroncompat.core_sets`, the one rule the simulator uses
too. A set that cannot work raises :class:`VisibleCoresError` with the documented reason and the sets that
would work. It is never rewritten: that would silently change which cores run. The error is raised through
``Patch.fail`` (a :class:`PatchError`, the shim's declared fail-fast): a bad core set must stop the script
with this message at ``import neuroncompat`` (exit status 1) rather than later in the runtime.
``CUDA_VISIBLE_DEVICES`` set without ``NEURON_RT_VISIBLE_CORES``: a warning with the translation, GPU ``i``
-> NeuronCore ``i`` under any LNC (the variable names logical cores, the ones ``torch.neuron`` counts, so
``cuda:i`` and ``neuron:i`` are the same device), and why that set cannot work when it cannot.

Example::

    NEURON_RT_VISIBLE_CORES=0-1,4-5 python train.py
    # before: a runtime error when torch initialises Neuron
    # after:  neuroncompat [visible_cores]: NEURON_RT_VISIBLE_CORES=0-1,4-5 is not contiguous: the Neuron
    #         runtime takes a list or range of NeuronCores that must be contiguous, ... Use one run per
    #         process (0,1 or 4,5), or 0-5 for all of them
"""

from __future__ import annotations

import os

from neuroncompat.core_sets import ENV, format_cores, parse_cores, refusal
from neuroncompat.patch import Patch, PatchError

CUDA_ENV = "CUDA_VISIBLE_DEVICES"


class VisibleCoresError(PatchError):
    """``NEURON_RT_VISIBLE_CORES`` names a set the Neuron runtime will reject."""


class VisibleCores(Patch):
    id = "visible_cores"
    reason = "NEURON_RT_VISIBLE_CORES must be one contiguous run of logical cores (0,1 not 1,2): fail early, saying why"
    error = VisibleCoresError
    before_device = True

    def activate(self) -> None:
        value = os.environ.get(ENV)
        if value is not None:
            self._validate(value)
        elif os.environ.get(CUDA_ENV, "").strip():
            self._translate_cuda(os.environ[CUDA_ENV])

    def _validate(self, value: str) -> None:
        refused = refusal(value)
        if refused is not None:
            self.fail(refused)

    def _translate_cuda(self, value: str) -> None:
        try:
            gpus = sorted(set(parse_cores(value)))
        except ValueError:
            self.warn(
                "%s=%s is ignored by the Neuron runtime, and it is not a list of indices to translate", CUDA_ENV, value
            )
            return
        equivalent = format_cores(gpus)
        refused = refusal(equivalent)
        self.warn(
            "%s=%s is ignored by the Neuron runtime (every NeuronCore stays visible); the equivalent is %s=%s%s",
            CUDA_ENV,
            value,
            ENV,
            equivalent,
            f", but {refused}" if refused else "",
        )
