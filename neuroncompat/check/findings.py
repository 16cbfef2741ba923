"""``neuroncompat check``'s stage findings as the shared report model's findings (``neuroncompat_report.model``).

What the dry run's recorder saw during a stage (a graph break, a data-dependent op, a CPU fallback, a complex or
float64 tensor on the device) is a ``warning`` under its kind as the rule id, at the site's file and line, its
message what was seen and how often; the text and markdown reports render it with the renderers every command
shares, so it reads as the same finding does in ``neuroncompat simulate`` and ``neuron-migrate``.
"""

from __future__ import annotations

from typing import Any

from neuroncompat_report.model import Finding
from neuroncompat_report.places import split_location

TOOL = "neuroncompat check"


def finding(record: dict[str, Any]) -> Finding:
    """The model's finding for one of a stage's ``findings`` (its JSON record, ``report_types.StageFinding``)."""
    place = split_location(record["site"])
    times = f" (x{record['count']})" if record["count"] > 1 else ""
    return Finding(
        TOOL,
        record["kind"],
        "warning",
        place[0] if place else None,
        place[1] if place else None,
        record["what"] + times,
    )
