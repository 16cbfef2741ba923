"""``neuroncompat simulate --format github``: GitHub Actions workflow commands (annotations on the PR).

One annotation per finding to act on and per shape-churn warning, at the user's line: ``::error`` for
the kinds ``--strict`` fails on, ``::warning`` for the rest, and an ``::error`` without a file when the
script itself failed. A finding that needs no change (``informational``) gets none, unless ``--strict``
was told to fail on its kind. Values are escaped as the Actions toolkit does (``%``, CR, LF; plus ``:``
and ``,`` in properties), as ``neuron-migrate --format github`` does. A location outside the
working directory (a library) gets no ``file``: GitHub could not place it.
"""

from __future__ import annotations

import os
from typing import Any

from neuroncompat.simulate.report import fix_text, split_location

_TITLE = {
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


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def _command(level: str, location: str | None, title: str, message: str) -> str:
    props = []
    place = split_location(location)
    if place is not None and not os.path.isabs(place[0]) and os.path.exists(place[0]):
        props += [f"file={_property(place[0])}", f"line={place[1]}"]
    props.append(f"title={_property('neuroncompat simulate: ' + title)}")
    return f"::{level} {','.join(props)}::{_data(message)}\n"


def render(report: dict[str, Any]) -> str:
    strict = set(report["strict"]["kinds"])
    out = []
    if report["exit_code"] != 0:
        message = f"{' '.join(report['command'])} exited with {report['exit_code']}"
        out.append(_command("error", None, "script failed", message))
    for rank in report["ranks"]:
        for warning in rank["warnings"]:
            kind = "rejected" if warning["kind"] == "rejected" else "shape_churn"
            message = f"rank {rank['rank']}: {warning['shapes']} at {warning['where']}. "
            message += " ".join(warning["findings"])
            message += "".join(f"\nfix: {fix['message']}" for fix in warning["fixes"])
            level = "error" if kind in strict else "warning"
            out.append(_command(level, warning["user"] or warning["site"], _TITLE[warning["kind"]], message))
        for finding in rank["findings"]:
            if finding.get("informational") and finding["kind"] not in strict:
                continue  # needs no change: not a warning on the pull request
            message = f"rank {rank['rank']}: {finding['description']} (x{finding['count']})"
            message += f"\nfix: {fix_text(finding)}"
            if finding.get("unknown"):
                message += f"\nunknown on trn2: {finding['unknown']}"
            if finding["references"]:
                message += "\nsee " + " ".join(finding["references"])
            level = "error" if finding["kind"] in strict else "warning"
            out.append(_command(level, finding["user"] or finding["site"], _TITLE[finding["kind"]], message))
    return "".join(out)
