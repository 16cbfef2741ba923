"""``neuroncompat simulate``'s findings as the shared report model's findings (``neuroncompat_report.model``).

A rank's finding (a graph break, a data-dependent op, a CPU fallback, a complex, float64 or int64 tensor on the
device) is one ``Finding`` under its kind as the rule id, at the user's line (the library line where no user line
called it), its message the description, the library line under the user's when they differ, and how often; the
text, markdown and GitHub reports render it with the renderers every command shares, so it reads as the same
finding does in ``neuroncompat check`` and ``neuron-migrate``. Its severity is the one the GitHub annotations
always gave: ``error`` for a kind ``--strict`` fails on, ``note`` for one that needs no change (informational),
else ``warning``. The fix here is advice, not a change the tool makes, so the record carries no ``Fix``: each
report gives the advice on its own line.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from neuroncompat_report.model import Finding, Severity
from neuroncompat_report.places import split_location

TOOL = "neuroncompat simulate"
# What each kind is called in a title or a table: the findings' kinds, then the shape-churn warnings' kinds.
TITLES = {
    "graph_break": "graph break",
    "data_dependent": "data-dependent shape",
    "cpu_fallback": "CPU fallback",
    "complex_on_device": "complex on device",
    "fp64_on_device": "float64 on device",
    "int64_on_device": "int64 on device",
    "recompiles": "recompiles",
    "eager_shapes": "eager shape churn",
    "rejected": "rejected graph",
}


def severity(kind: str, informational: bool, strict: Collection[str]) -> Severity:
    """What the run makes of a kind: it fails on a strict one; an informational one needs no change."""
    return "error" if kind in strict else "note" if informational else "warning"


def finding(record: dict[str, Any], strict: Collection[str]) -> Finding:
    """The model's finding for one of a rank's ``findings`` (its JSON record); ``strict``: the kinds that fail."""
    place = split_location(record["where"])
    message = record["description"]
    if record["site"] and record["site"] != record["where"]:
        message += f" (in {record['site']})"
    message += f" (x{record['count']})"
    return Finding(
        TOOL,
        record["kind"],
        severity(record["kind"], bool(record.get("informational")), strict),
        place[0] if place else None,
        place[1] if place else None,
        message,
        title=f"{TOOL}: {TITLES[record['kind']]}",
    )
