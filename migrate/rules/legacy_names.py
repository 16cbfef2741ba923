"""Which names belong to Optimum Neuron and torch_xla, and the native name each one becomes.

The Optimum Neuron (NM5xx) and torch_xla (NM6xx) families register their name swaps here at
import (`swap`); the legacy import rewrite (`legacy_imports`) renames by this table.
Names resolve by import path, never by text: the training and inference
`NeuronModelForCausalLM` differ only in the module they come from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst

from migrate.markers import find_skip
from migrate.rules.base import code

ROOTS = ("optimum.neuron", "torch_xla")
MENTION = re.compile(r"optimum\.neuron|optimum\s+import\s+neuron|\btorch_xla\b")  # a file that may import them


@dataclass(frozen=True)
class Swap:
    """The native replacement of one legacy name; `module=None` means it has none and goes once unused."""

    rule_id: str
    module: str | None
    name: str | None


_SWAPS: dict[str, list[tuple[str, Swap]]] = {}


def swap(prefixes: Iterable[str], old: str, module: str | None, new: str | None, rule_id: str) -> None:
    """Register `old` imported from any module under `prefixes` as `module.new`."""
    for prefix in prefixes:
        _SWAPS.setdefault(old, []).append((prefix, Swap(rule_id, module, new)))


def resolve(qualified: str | None) -> Swap | None:
    """The swap for a qualified name; the longest matching module prefix wins.

    `optimum.neuron.models.training.NeuronModelForCausalLM` matches the training prefix before
    the generic `optimum.neuron` one, which is how the two same-named classes are told apart.
    """
    if not qualified:
        return None
    module, _, name = qualified.rpartition(".")
    best: tuple[int, Swap] | None = None
    for prefix, entry in _SWAPS.get(name, ()):
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), entry)
    return best[1] if best else None


def import_rule(module: str) -> str:
    """The rule that drops an unused import of a legacy module: NM601 for torch_xla, NM501 for Optimum."""
    return "NM601" if module.split(".")[0] == "torch_xla" else "NM501"


def is_legacy(qualified: str | None) -> bool:
    return bool(qualified) and any(qualified == r or qualified.startswith(r + ".") for r in ROOTS)  # type: ignore[union-attr]


def skipped(stmt: cst.CSTNode) -> bool:
    """True for a statement the user marked `# neuron-migrate: skip` (on it or on the line above).

    A `skip[...]` marker counts when it may name an Optimum Neuron or torch_xla rule (NM5xx,
    NM6xx, their TODOs NM91x): these module-level passes cannot tell which of them a change serves.
    """
    skip = find_skip(code(stmt))
    return skip is not None and any(skip.touches(family) for family in ("NM5", "NM6", "NM91"))
