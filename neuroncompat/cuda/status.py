"""The CUDA redirect's state in words, for ``neuroncompat doctor``.

Answers what a user debugging "why does my script (not) see CUDA" needs: whether the redirect
is on in this process or will be in the scripts this environment starts, how it was enabled
(``NEURONCOMPAT_CUDA=redirect`` or a ``neuroncompat.cuda.redirect()`` call), whether it can run
here (a Neuron device or the simulator), and who counts as user code (the callers rule and
``NEURONCOMPAT_CUDA_USER_PATHS``). Imports no torch.
"""

from __future__ import annotations

from neuroncompat import cuda, environment
from neuroncompat.cuda.callers import LIBRARY_PACKAGES, USER_PATHS_ENV


def lines(neuron_present: bool) -> list[str]:
    """Doctor lines; ``neuron_present``: TorchNeuron or the simulator was detected."""
    try:
        requested = cuda.requested()
    except ValueError as error:
        return [f"CUDA redirect: invalid setting, scripts will fail to start: {error}"]
    if requested and (neuron_present or cuda.is_redirected()):
        state = f"on ({cuda.ENV}=redirect): user code's CUDA calls run on the NeuronCore"
    elif cuda.is_redirected():
        state = "on (neuroncompat.cuda.redirect() was called in this process)"
    elif requested:
        state = (
            f"requested ({cuda.ENV}=redirect) but unavailable: no Neuron device and the simulator is off, "
            "so importing torch in a script raises RedirectUnavailable"
        )
    else:
        state = f"off ({cuda.ENV} unset; turn on with {cuda.ENV}=redirect or neuroncompat.cuda.redirect())"
    shown = ", ".join(environment.paths(USER_PATHS_ENV)) or "(unset)"
    return [
        f"CUDA redirect: {state}",
        f"  library code (sees the real device): {', '.join(LIBRARY_PACKAGES)}, the standard library, "
        "site-packages/dist-packages",
        "  user code (redirected): everything else (scripts, notebooks, exec'd code) and the paths in "
        f"{USER_PATHS_ENV}",
        f"  {USER_PATHS_ENV}: {shown}",
        f"  log directory: {cuda.sites.log_directory()} (NEURONCOMPAT_CUDA_LOG)",
    ]
