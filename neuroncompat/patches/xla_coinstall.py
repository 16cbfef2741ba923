"""``xla_coinstall``: a co-installed ``torch_xla`` does not send transformers/accelerate down XLA paths.

Gap (docs/gaps.md#xla_coinstall): hosts that had the legacy (XLA-based) torch-neuronx keep
``torch_xla`` installed next to native torch-neuronx. transformers then reports
``is_torch_xla_available()`` (it only looks for the package, utils/import_utils.py:491-509) and
``is_torch_neuroncore_available()`` (:1120-1121), which drive legacy code at import
(training_args.py:81-97) and XLA branches (training_args.py:1912, :1989, :2100); accelerate imports
``torch_xla`` at import (accelerate/utils/imports.py:31-41) and checks XLA *before* Neuron when it
picks the backend (accelerate/state.py:767-769). Both honour ``USE_TORCH_XLA=0``, read once at
import (transformers/utils/import_utils.py:163, accelerate/utils/imports.py:31).

Fix: when ``torch_xla`` is importable (``importlib.util.find_spec``, which imports nothing),
``USE_TORCH_XLA=0`` at ``import neuroncompat``, since both libraries read it once at import; the
warning saying so comes when the first of them is imported and still has the gap. A value the user
set is kept (with a warning if it enables XLA). If transformers or accelerate were imported before the shim, their
module-level flags are set as the variable would have set them and the cached checks cleared.
Code that already ran an XLA branch at import (``training_args`` importing ``torch_xla`` modules)
cannot be undone: import neuroncompat first. Each library's part stands down when its
``is_torch_xla_available`` knows about native Neuron (its source names ``neuron``); when both
have, ``USE_TORCH_XLA`` is restored as well.

Example::

    pip list | grep torch-xla   # left over from the XLA-based torch-neuronx
    import neuroncompat         # USE_TORCH_XLA=0: TrainingArguments().device == neuron:0, not xla:0
"""

from __future__ import annotations

import importlib.util
import inspect
import os
from types import ModuleType

from neuroncompat.patch import Patch

ENV = "USE_TORCH_XLA"
_FALSE = ("0", "false", "no", "off")


class XlaCoinstall(Patch):
    id = "xla_coinstall"
    reason = "a co-installed torch_xla sends transformers/accelerate down XLA paths: USE_TORCH_XLA=0"
    targets = ("transformers.utils.import_utils", "accelerate.utils.imports")

    def activate(self) -> None:
        self._turned_off = False
        self._user: str | None = None
        self._fixed: set[str] = set()
        if importlib.util.find_spec("torch_xla") is None:
            return
        self._user = os.environ.get(ENV)
        if self._user is None:
            self.set_env(ENV, "0")
            self._turned_off = True

    def patch_module(self, name: str, module: ModuleType) -> bool:
        if "neuron" in inspect.getsource(module.is_torch_xla_available):
            self._fixed.add(name)
            if self._fixed == set(self.targets):
                self.stand_down("both libraries tell native Neuron from torch_xla")
            return False
        if self._turned_off:
            self.warn(
                "torch_xla is installed next to torch-neuronx: %s=0 so transformers and accelerate use the native neuron "
                "device (set %s=1 to keep XLA)",
                ENV,
                ENV,
            )
        elif self._user is not None and self._user.strip().lower() not in _FALSE:
            self.warn(
                "%s=%s kept as you set it: with torch_xla installed, transformers and accelerate take XLA paths, "
                "not the native neuron device",
                ENV,
                self._user,
            )
        if not self._turned_off:
            return True
        if name == "transformers.utils.import_utils":
            if module.USE_TORCH_XLA != "0":  # imported before the shim set the variable
                self.replace(module, "USE_TORCH_XLA", "0")
                self.changed("transformers was imported first: its USE_TORCH_XLA flag set to 0")
        elif module.USE_TORCH_XLA or module._torch_xla_available:
            self.replace(module, "USE_TORCH_XLA", False)
            self.replace(module, "_torch_xla_available", False)
            self.changed("accelerate was imported first: its torch_xla flags set to False")
        for func_name in ("is_torch_xla_available", "is_torch_neuroncore_available"):
            cache_clear = getattr(getattr(module, func_name, None), "cache_clear", None)
            if cache_clear is not None:
                cache_clear()
        return True
