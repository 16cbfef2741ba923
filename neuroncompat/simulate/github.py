"""``neuroncompat simulate --format github``: GitHub Actions workflow commands (annotations on the PR).

One annotation per finding to act on and per shape-churn warning, at the user's line: ``::error`` for
the kinds ``--strict`` fails on, ``::warning`` for the rest, and an ``::error`` without a file when the
script itself failed. A finding that needs no change (``informational``) gets none, unless ``--strict``
was told to fail on its kind. Each is the shared report model's finding (:mod:`~neuroncompat.simulate.findings`)
rendered by the annotation renderer every command shares (``neuroncompat_report.github``), its message led by
the rank and followed by the fix, what is unknown and the sources, since an annotation stands alone. A location
outside the working directory (a library) gets no ``file``: GitHub could not place it.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from neuroncompat.simulate.findings import TITLES, TOOL, finding, severity
from neuroncompat.simulate.report import fix_text
from neuroncompat_report import github
from neuroncompat_report.model import Finding
from neuroncompat_report.places import split_location


def _placed(found: Finding) -> Finding:
    """`found` without its file where GitHub could not place it: a library's path, or none in the checkout."""
    if found.file is not None and not os.path.isabs(found.file) and os.path.exists(found.file):
        return found
    return replace(found, file=None, line=None)


def _warning(rank: int, warning: dict[str, Any], strict: set[str]) -> Finding:
    """A shape-churn (or rejected-graph) warning as a finding under its kind, at the user's line."""
    kind = "rejected" if warning["kind"] == "rejected" else "shape_churn"
    message = f"rank {rank}: {warning['shapes']} at {warning['where']}. " + " ".join(warning["findings"])
    message += "".join(f"\nfix: {fix['message']}" for fix in warning["fixes"])
    place = split_location(warning["user"] or warning["site"])
    return Finding(
        TOOL,
        warning["kind"],
        severity(kind, False, strict),
        place[0] if place else None,
        place[1] if place else None,
        message,
        title=f"{TOOL}: {TITLES[warning['kind']]}",
    )


def _annotated(rank: int, record: dict[str, Any], strict: set[str]) -> Finding:
    """A rank's finding, its message led by the rank and followed by the fix, what is unknown and the sources."""
    found = finding(record, strict)
    message = f"rank {rank}: {found.message}\nfix: {fix_text(record)}"
    if record.get("unknown"):
        message += f"\nunknown on trn2: {record['unknown']}"
    if record["references"]:
        message += "\nsee " + " ".join(record["references"])
    return replace(found, message=message)


def render(report: dict[str, Any]) -> str:
    strict = set(report["strict"]["kinds"])
    found = []
    if report["exit_code"] != 0:
        message = f"{' '.join(report['command'])} exited with {report['exit_code']}"
        found.append(Finding(TOOL, "script_failed", "error", None, None, message, title=f"{TOOL}: script failed"))
    for rank in report["ranks"]:
        found.extend(_warning(rank["rank"], warning, strict) for warning in rank["warnings"])
        found.extend(
            _annotated(rank["rank"], record, strict)
            for record in rank["findings"]
            if not record.get("informational") or record["kind"] in strict
        )
    return github.render([_placed(f) for f in found], {})
