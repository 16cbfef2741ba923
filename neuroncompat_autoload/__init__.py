"""PyTorch device-backend autoload for the simulated Neuron device (``NEURONCOMPAT_SIMULATE=1``).

On a Trainium host, torch-neuronx is loaded by ``import torch`` itself (PyTorch's ``torch.backends`` entry
points, https://docs.pytorch.org/docs/stable/accelerator/autoload.html): every process that imports torch sees
``torch.neuron``, including launchers that never run the shim. ``accelerate launch --num_processes 2 train.py``
counts NeuronCores in the launcher to decide whether to start several processes; where the simulated device is
only switched on by ``import neuroncompat`` (in the ranks), the launcher sees no accelerator and silently starts
ONE process, so the dry run differs from the hardware run. This entry point does what torch-neuronx's does, for
the simulator, only when ``NEURONCOMPAT_SIMULATE`` asks for it: it enables the simulated device as torch is
imported. ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns it off, as it turns off torch-neuronx's.

It lives outside the ``neuroncompat`` package so that loading the entry point costs one environment read when
``NEURONCOMPAT_SIMULATE`` is unset. When it is set, it enables the simulated device and nothing else: the shim's
patches start only where the script asks for them (``import neuroncompat``, ``python -m neuroncompat``), as on a
trn2, where torch-neuronx's autoload does not start neuroncompat either. A dry run of a script that lacks the
shim import must fail or fall back as the hardware run would. Importing ``neuroncompat.simulator`` runs the
package's ``__init__``, which would start the shim; :data:`ENABLING` tells it not to, and the package object is
then dropped from ``sys.modules`` so that the script's own ``import neuroncompat`` runs ``__init__`` again and
starts the shim (the submodules stay loaded). It never breaks ``import torch``: a failure is a warning,
a value ``neuroncompat.environment`` does not accept (``NEURONCOMPAT_SIMULATE=2``) too, naming the variable.
"""

from __future__ import annotations

import os
import sys

# True while load() imports the simulator: neuroncompat/__init__.py then leaves the shim unstarted.
ENABLING = False


def load() -> None:
    """The ``torch.backends`` entry point: enable the simulated device when ``NEURONCOMPAT_SIMULATE`` is on."""
    if not os.environ.get("NEURONCOMPAT_SIMULATE", "").strip():
        return
    if "neuroncompat" in sys.modules:
        return  # torch is being imported by the shim's own start, which enables the simulator next
    global ENABLING
    ENABLING = True
    try:
        from neuroncompat import environment  # the one parser of NEURONCOMPAT_* values

        if not environment.flag("NEURONCOMPAT_SIMULATE"):
            return
        from neuroncompat import simulator

        if not simulator.is_enabled():
            simulator.enable()
    except Exception as error:  # noqa: BLE001  # torch's import must survive whatever goes wrong here
        import warnings

        warnings.warn(
            f"neuroncompat: NEURONCOMPAT_SIMULATE is set but the simulated Neuron device could not be enabled "
            f"while torch was imported ({type(error).__name__}: {error}); this process runs without it",
            RuntimeWarning,
            stacklevel=2,
        )
    finally:
        ENABLING = False
        sys.modules.pop("neuroncompat", None)  # the script's `import neuroncompat` runs __init__ (the shim) again
