"""``async_load``: turn off transformers' threaded weight loading on Neuron.

Gap: transformers materialises weights in a thread pool (``core_model_loading``), calling
``tensor.to(neuron)`` from worker threads, which hangs on Neuron (TRL PR #5125's script sets
``HF_DEACTIVATE_ASYNC_LOAD=1  # Disable asynchronous loading to avoid hanging``). The variable is
read on every ``from_pretrained`` call (docs/gaps.md#async_load), so setting it works even
after transformers was imported.

Fix: when transformers' loader is imported, ``HF_DEACTIVATE_ASYNC_LOAD=1`` unless the user set it;
a user's false value is kept, with a warning. Stands down, setting and saying nothing, when that
loader, ``convert_and_load_state_dict_in_model``, no longer reads the variable or decides about
Neuron itself.

Example::

    import neuroncompat                       # HF_DEACTIVATE_ASYNC_LOAD=1
    AutoModelForCausalLM.from_pretrained(p, device_map="neuron")   # loads on the main thread
"""

from __future__ import annotations

import inspect
import os
from types import ModuleType

from neuroncompat.patch import Patch

ENV = "HF_DEACTIVATE_ASYNC_LOAD"
_TRUE = ("1", "true", "y", "yes", "on")


class AsyncLoad(Patch):
    id = "async_load"
    reason = "async weight loading hangs on Neuron: set HF_DEACTIVATE_ASYNC_LOAD=1"
    targets = ("transformers.core_model_loading",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        loader = inspect.getsource(module.convert_and_load_state_dict_in_model)
        if ENV not in loader or "neuron" in loader:
            return False
        user = os.environ.get(ENV)
        if user is None:
            self.set_env(ENV, "1")
            self.changed("%s=1 (threaded weight loading hangs on Neuron)", ENV)
        elif user.strip().lower() not in _TRUE:
            self.warn("%s=%s kept as you set it, but threaded weight loading can hang on Neuron", ENV, user)
        return True
