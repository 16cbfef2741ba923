"""The patch contract's two ways of failing: a deliberate stop passes through, a bug is contained.

A patch stops a run on purpose with ``Patch.fail`` (a ``PatchError``): the script must end with
the patch's message, naming it, and nothing of the patch may stay applied (a stop at
``import neuroncompat``, where the script ends with the message alone, is checked with the real
``visible_cores`` in test_patch_visible_cores.py). Any other exception is
a bug in that patch: the script goes on without it, and one WARNING names the patch, the error and
the switch that turns it off.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from types import ModuleType

import pytest

from neuroncompat import shim as shim_module
from neuroncompat.patch import Patch, PatchError
from neuroncompat.patches.async_load import AsyncLoad

_MARKER = "NEURONCOMPAT_TEST_MARKER"


class _StopsAtActivate(Patch):
    id = "stops_at_activate"
    reason = "a setting that cannot work: stop the run"

    def activate(self) -> None:
        self.set_env(_MARKER, "set before the stop")
        self.fail("SOME_SETTING=bad cannot work on Neuron; use SOME_SETTING=good")


class _StopsAtTarget(Patch):
    id = "stops_at_target"
    reason = "a setting found at import that cannot work: stop the run"
    targets = ("json",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        self.replace(module, "dumps", None)
        self.fail("json cannot work here")


class _BuggyActivate(Patch):
    id = "buggy_activate"
    reason = "a patch with a bug in its environment step"

    def activate(self) -> None:
        self.set_env(_MARKER, "set before the bug")
        raise RuntimeError("unexpected state")


class _BuggyTarget(Patch):
    id = "buggy_target"
    reason = "a patch with a bug in its module step"
    targets = ("json",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        self.replace(module, "dumps", None)
        return {}["missing"]


@pytest.fixture
def with_patches(shim: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Callable[..., ModuleType]:
    """Run the shim with the given patch types (plus a real one, to show the others still apply)."""
    monkeypatch.delenv(_MARKER, raising=False)

    def use(*types: type[Patch]) -> ModuleType:
        monkeypatch.setattr(shim_module, "_patch_types", lambda: [*types, AsyncLoad])
        return shim

    return use


@pytest.mark.parametrize("patch_type", [_StopsAtActivate, _StopsAtTarget])
def test_a_deliberate_stop_raises_naming_the_patch_and_undoes_it(
    with_patches: Callable[..., ModuleType], patch_type: type[Patch]
) -> None:
    import json

    dumps = json.dumps
    shim = with_patches(patch_type)
    with pytest.raises(PatchError) as stop:
        shim.apply()
    assert stop.value.patch_id == patch_type.id
    assert str(stop.value).startswith(f"neuroncompat [{patch_type.id}]: ")
    assert shim.status()[patch_type.id].state == "failed"
    assert _MARKER not in os.environ and json.dumps is dumps, "the stopping patch's changes are undone"


@pytest.mark.parametrize("patch_type", [_BuggyActivate, _BuggyTarget])
def test_a_bug_in_a_patch_is_contained_and_logged(
    with_patches: Callable[..., ModuleType], caplog: pytest.LogCaptureFixture, patch_type: type[Patch]
) -> None:
    import json

    dumps = json.dumps
    shim = with_patches(patch_type)
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        status = shim.apply()
    assert status[patch_type.id].state == "failed"
    assert status["async_load"].state in ("applied", "waiting"), "the other patches still apply"
    assert _MARKER not in os.environ and json.dumps is dumps, "the broken patch's changes are undone"
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and f"[{patch_type.id}]" in r.getMessage()
    ]
    assert len(warnings) == 1
    assert "could not be applied and was left off" in warnings[0]
    assert ("RuntimeError: unexpected state" if patch_type is _BuggyActivate else "KeyError: 'missing'") in warnings[0]
    assert f"NEURONCOMPAT_DISABLE={patch_type.id} turns it off" in warnings[0]
