"""The dry run's last lines: one verdict and the command to run next.

A report ran to 38 lines, 20 of them findings that need no change (int64 on the device while the values
fit in int32), and ended there: a newcomer could not tell whether the script was ready. The text report
now ends with

- one line counting the findings that need no change (``--show-info`` lists them),
- ``verdict: N compilation(s), about M on trn2; K finding(s) to act on`` (or that the script failed): a
  compilation is a graph or an eager forward shape, each compiled once by Neuron,
- ``next: ...``: the command to run now, on a trn2 when nothing is left to act on, else the dry run again.

A finding to act on is a warning (a rejected graph, shape churn) or a finding that is not informational,
counted once across ranks (the same line on every rank of a data-parallel job is one change to make).
"""

from __future__ import annotations

import shlex
from typing import Any

from neuroncompat.simulate.durations import duration


def _distinct(report: dict[str, Any], informational: bool) -> set[tuple[str, ...]]:
    """The findings (and, unless ``informational``, the warnings) of every rank, each counted once."""
    found: set[tuple[str, ...]] = set()
    for rank in report["ranks"]:
        found.update(
            (finding["kind"], finding["where"], finding["description"])
            for finding in rank["findings"]
            if bool(finding.get("informational")) == informational
        )
        if not informational:
            found.update((warning["kind"], warning["where"]) for warning in rank["warnings"])
    return found


def to_act_on(report: dict[str, Any]) -> int:
    return len(_distinct(report, informational=False))


def informational(report: dict[str, Any]) -> int:
    return len(_distinct(report, informational=True))


def compilations(report: dict[str, Any]) -> int:
    """What the slowest rank compiles (graphs and eager forward shapes): ranks compile in parallel."""
    slowest = max(report["ranks"], key=lambda rank: rank["estimated_compile_seconds"], default=None)
    return 0 if slowest is None else slowest["compiled_graphs"] + slowest["eager_shapes"]


def _script(command: list[str]) -> str:
    """The script a command runs (the first argument ending in ``.py``), else ``SCRIPT``."""
    return next((shlex.quote(arg) for arg in command if arg.endswith(".py")), "SCRIPT")


def _cost(report: dict[str, Any]) -> str:
    """``N compilation(s), about M on trn2 at C each (--graph-cost)``: the run's compile estimate.

    Called compilations, not graphs: the count adds the eager forward shapes, which the rank lines above
    list apart from the compiled graphs, and "3 graph(s)" under "1 compiled graph(s)" read as a contradiction.
    """
    per_rank = " per rank (ranks compile in parallel)" if len(report["ranks"]) > 1 else ""
    return (
        f"{compilations(report)} compilation(s){per_rank}, about {duration(report['estimated_compile_seconds'])} on trn2 "
        f"at {duration(report['graph_cost_seconds'])} each (--graph-cost)"
    )


def lines(report: dict[str, Any], show_info: bool) -> list[str]:
    out = []
    info = informational(report)
    if info and not show_info:
        out.append(
            f"{info} finding(s) need no change (int64 on the device while the values fit in int32); "
            "--show-info lists them"
        )
    command = shlex.join(report["command"])
    again = f"neuroncompat simulate -- {command}"
    if not report["ranks"]:
        out.append("verdict: nothing ran on the neuron device, so nothing here says how it would run on trn2")
        out.append(f"next: see what moves it to the device: neuron-migrate {_script(report['command'])}")
        return out
    if report["exit_code"] != 0:
        out.append(f"verdict: the script FAILED (exit code {report['exit_code']}) after {_cost(report)}")
        out.append(f"next: fix the failure above, then dry-run again: {again}")
        return out
    act = to_act_on(report)
    out.append(f"verdict: {_cost(report)}; {act} finding(s) to act on")
    out.append(
        f"next: fix them (each has its fix above), then dry-run again: {again}"
        if act
        else f"next: on a trn2, {command}"
    )
    return out
