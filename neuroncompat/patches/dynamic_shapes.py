"""``dynamic_shapes``: Dynamo's automatic dynamic shapes off, so every graph is one Neuron can compile.

Gap (TRL #7660): with ``torch.compile(dynamic=None)`` (the default) Dynamo marks a dimension
dynamic the second time it sees a new size, and the Neuron backend rejects graphs with symbolic
shapes ("dynamic=True is rejected during compilation"). transformers 5.23's Trainer passes
``dynamic=False`` for the neuron backend, but user ``torch.compile`` calls and ``CompileConfig``
still default to ``dynamic=None`` (docs/gaps.md#dynamic_shapes).

Fix: ``torch._dynamo.config.automatic_dynamic_shapes = False`` (set when ``torch._dynamo`` is
imported) and ``TORCH_DYNAMO_AUTOMATIC_DYNAMIC_SHAPES=0`` for child processes. A value the user
set in the environment is kept (with a warning if it enables dynamic shapes). ``CompileConfig(dynamic=True)``
gets a warning: Neuron will reject its graphs (``torch.compile(dynamic=True)`` itself is the
``compile`` patch's job).

Static shapes mean one graph per (batch, length) bucket, and Dynamo recompiles a frame at most
``recompile_limit`` times (8) before it silently runs that frame eagerly for good: prompt plus
completion lengths padded to multiples of 128 can pass 8 buckets.
The limit is raised to 64 (docs/environment.md); a value set with ``NEURONCOMPAT_RECOMPILE_LIMIT`` is
used as given, lower than Dynamo's 8 too, and logged. A script that sets
``torch._dynamo.config.recompile_limit`` itself does so after this and wins.

Stands down (environment restored, ``CompileConfig`` unwrapped) when Dynamo's own defaults, read
from its config entries rather than the possibly env-set values, are already static
(``automatic_dynamic_shapes`` False) and allow the recompiles (``recompile_limit`` >= the limit).

Example::

    compiled = torch.compile(model, backend="neuron")
    for n in (4, 8, 16): compiled(x[:n])   # three static graphs, not a static then a dynamic one
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat import environment
from neuroncompat.patch import Patch

ENV = "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_SHAPES"
LIMIT_ENV = "NEURONCOMPAT_RECOMPILE_LIMIT"
_FALSE = ("0", "false", "no", "off")


def _dynamo_default(config: ModuleType, name: str) -> Any:
    """Dynamo's built-in default for ``name``, whatever the environment set (torch's config entries)."""
    entries = getattr(config, "_config", {})
    return entries[name].default if name in entries else getattr(config, name)


def _dynamo_defaults_dynamic(config: ModuleType) -> bool:
    return bool(_dynamo_default(config, "automatic_dynamic_shapes"))


class DynamicShapes(Patch):
    id = "dynamic_shapes"
    reason = "Dynamo automatic dynamic shapes produce graphs Neuron rejects (TRL #7660): keep shapes static"
    targets = ("torch._dynamo.config", "transformers.generation.configuration_utils")

    def activate(self) -> None:
        self._user_env = os.environ.get(ENV)
        if self._user_env is None:
            self.set_env(ENV, "0")
        elif self._user_env.strip().lower() not in _FALSE:
            self.warn("%s=%s kept as you set it, but Neuron rejects graphs with dynamic shapes", ENV, self._user_env)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        if name == "torch._dynamo.config":
            limit = environment.integer(LIMIT_ENV)
            chosen = environment.is_set(LIMIT_ENV)  # the user's limit is used as given, even a lower one
            default_limit = _dynamo_default(module, "recompile_limit")
            if not _dynamo_defaults_dynamic(module) and (default_limit == limit if chosen else default_limit >= limit):
                self.stand_down(name)
                return False
            if self._user_env is None and module.automatic_dynamic_shapes:
                self.replace(module, "automatic_dynamic_shapes", False)
                self.changed(
                    "torch._dynamo.config.automatic_dynamic_shapes = False (Neuron compiles static shapes only)"
                )
            if module.recompile_limit < limit or (chosen and module.recompile_limit != limit):
                self.changed(
                    "torch._dynamo.config.recompile_limit %d -> %d (%s)",
                    module.recompile_limit,
                    limit,
                    f"{LIMIT_ENV}={limit}" if chosen else "one graph per static shape bucket",
                )
                self.replace(module, "recompile_limit", limit)
            return True
        config_cls = module.CompileConfig
        self.replace(config_cls, "__init__", self._warn_dynamic_config(config_cls.__init__))
        return True

    def _warn_dynamic_config(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def __init__(config: Any, *args: Any, **kwargs: Any) -> None:
            original(config, *args, **kwargs)
            if config.dynamic is True:
                patch.warn("CompileConfig(dynamic=True): the Neuron backend rejects dynamic graphs; use dynamic=False")

        return __init__
