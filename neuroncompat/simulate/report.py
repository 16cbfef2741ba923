"""The ``neuroncompat simulate`` report: per rank, what Neuron would compile and what it would cost.

:func:`build` turns the per-process records (:mod:`neuroncompat.simulate.record`) into one
JSON-ready dict; :func:`render_text` prints it for reading, :func:`render_json` for tools. Both
are deterministic for a deterministic script (no timings, no absolute paths under site-packages
or the working directory).

JSON schema (``"schema": "neuroncompat.simulate/1"``; fields are only ever added)::

    {
      "schema": "neuroncompat.simulate/1",
      "command": [str],                 # the command as given after --
      "exit_code": int,                 # the script's (the report does not change it)
      "graph_cost_seconds": float,      # --graph-cost
      "max_shapes": int,                # --max-shapes: a location with more is warned about
      "estimated_compile_seconds": float,   # the slowest rank's (ranks compile in parallel)
      "missing_ranks": [int],           # ranks of WORLD_SIZE that wrote no record (killed)
      "ranks": [{
        "rank": int, "pid": int, "world_size": int,
        "compiled_graphs": int,         # distinct torch.compile graphs Neuron accepts
        "rejected_graphs": int,         # distinct graphs with dynamic shapes: Neuron rejects them
        "eager_shapes": int,            # distinct (module, input signature) run eagerly
        "estimated_compile_seconds": float,  # (compiled_graphs + eager_shapes) * graph_cost_seconds
        "compiled": [{                  # one per compiled function and call site
          "code": str, "site": str, "user": str | null,
          "graphs": [{"signature": str, "compile_id": str, "ops": int, "rejected": bool,
                      "inputs": [{"shape": [int | str] | null, "dtype": str, "dynamic": bool}]}]
        }],
        "eager": [{                     # one per module class and call site, outermost calls only
          "module": str, "site": str | null, "user": str | null, "calls": int,
          "shapes": [{"inputs": [{"name": str, "shape": [int], "dtype": str}], "calls": int}],
          "dropped_shapes": int         # calls with signatures beyond the recorder's bound
        }],
        "dropped_calls": int,           # eager calls from locations beyond the recorder's bound
        "warnings": [{
          "kind": "recompiles" | "eager_shapes" | "rejected",
          "where": str,                 # the location, as in the text report
          "shapes": int,                # distinct shapes (or rejected graphs) there
          "findings": [str],            # what varies between the shapes
          "fixes": [{"id": str, "message": str}]
        }]
      }]
    }

A location is the *site* (the innermost caller outside torch and neuroncompat, often library
code such as ``transformers/generation/utils.py``) and the *user* line (the innermost caller in
the user's own files); see :mod:`neuroncompat.simulate.locations`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from neuroncompat.simulate.advice import DYNAMIC_SHAPES, Tensor, diagnose

SCHEMA = "neuroncompat.simulate/1"
DEFAULT_GRAPH_COST = 60.0
DEFAULT_MAX_SHAPES = 4
# Rows of shapes the text report shows per location (the JSON has them all).
_TEXT_ROWS = 8
_TEXT_INPUTS = 4


def load_records(directory: str | Path) -> list[dict[str, Any]]:
    """The records the processes wrote, by rank then pid."""
    records = [json.loads(path.read_text()) for path in Path(directory).glob("rank*.json")]
    return sorted(records, key=lambda r: (r["rank"], r["pid"]))


def _compiled_tensors(graph: dict[str, Any]) -> list[Tensor]:
    return [(f"#{i}", spec["shape"], spec["dtype"]) for i, spec in enumerate(graph["inputs"])]


def _eager_tensors(shape: dict[str, Any]) -> list[Tensor]:
    return [(t["name"], t["shape"], t["dtype"]) for t in shape["inputs"]]


def _where(entry: dict[str, Any]) -> str:
    where = entry.get("module") or entry["code"]
    where += f" called at {entry['site'] or '<unknown>'}"
    if entry["user"] and entry["user"] != entry["site"]:
        where += f" from {entry['user']}"
    return where


def _warning(kind: str, entry: dict[str, Any], signatures: Sequence[Sequence[Tensor]]) -> dict[str, Any]:
    diagnosis = diagnose(signatures)
    return {
        "kind": kind,
        "where": _where(entry),
        "shapes": len(signatures),
        "findings": list(diagnosis.findings),
        "fixes": [{"id": fix.id, "message": fix.message} for fix in diagnosis.fixes],
    }


def _compiled_groups(graphs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Graphs by (compiled function, site, user line), one per signature, in first-compiled order."""
    groups: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    for graph in graphs:
        key = (graph["code"], graph["trigger"], graph["user"])
        group = groups.setdefault(key, {"code": key[0], "site": key[1], "user": key[2], "graphs": []})
        if all(g["signature"] != graph["signature"] for g in group["graphs"]):
            group["graphs"].append({k: graph[k] for k in ("signature", "compile_id", "ops", "rejected", "inputs")})
    return list(groups.values())


def _rank(record: dict[str, Any], graph_cost: float, max_shapes: int) -> dict[str, Any]:
    compiled = _compiled_groups(record["compiled"])
    warnings: list[dict[str, Any]] = []
    for group in compiled:
        accepted = [g for g in group["graphs"] if not g["rejected"]]
        rejected = [g for g in group["graphs"] if g["rejected"]]
        if rejected:
            warnings.append({
                "kind": "rejected", "where": _where(group), "shapes": len(rejected),
                "findings": [f"{len(rejected)} graph(s) with dynamic shapes: the Neuron backend rejects them"],
                "fixes": [{"id": DYNAMIC_SHAPES.id, "message": DYNAMIC_SHAPES.message}],
            })
        if len(accepted) > max_shapes:
            warnings.append(_warning("recompiles", group, [_compiled_tensors(g) for g in accepted]))
    for entry in record["eager"]:
        if len(entry["shapes"]) > max_shapes:
            warnings.append(_warning("eager_shapes", entry, [_eager_tensors(s) for s in entry["shapes"]]))
    signatures = {g["signature"]: g["rejected"] for group in compiled for g in group["graphs"]}
    compiled_graphs = sum(1 for rejected in signatures.values() if not rejected)
    eager_shapes = len({(e["module"], json.dumps(s["inputs"])) for e in record["eager"] for s in e["shapes"]})
    return {
        "rank": record["rank"],
        "pid": record["pid"],
        "world_size": record["world_size"],
        "compiled_graphs": compiled_graphs,
        "rejected_graphs": len(signatures) - compiled_graphs,
        "eager_shapes": eager_shapes,
        "estimated_compile_seconds": (compiled_graphs + eager_shapes) * graph_cost,
        "compiled": compiled,
        "eager": record["eager"],
        "dropped_calls": record["dropped_calls"],
        "warnings": warnings,
    }


def build(
    records: list[dict[str, Any]],
    command: Sequence[str],
    exit_code: int,
    graph_cost: float = DEFAULT_GRAPH_COST,
    max_shapes: int = DEFAULT_MAX_SHAPES,
) -> dict[str, Any]:
    """The report for one simulated run (the JSON schema in the module docstring)."""
    ranks = [_rank(record, graph_cost, max_shapes) for record in records]
    world = max((r["world_size"] for r in records), default=0)
    seen = {r["rank"] for r in records}
    return {
        "schema": SCHEMA,
        "command": list(command),
        "exit_code": exit_code,
        "graph_cost_seconds": graph_cost,
        "max_shapes": max_shapes,
        "estimated_compile_seconds": max((r["estimated_compile_seconds"] for r in ranks), default=0.0),
        "missing_ranks": [rank for rank in range(world) if rank not in seen],
        "ranks": ranks,
    }


def render_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2)


# -- text -------------------------------------------------------------------------------------
def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60:02d} min"


def _tensor(name: str | None, shape: Sequence[int | str] | None, dtype: str) -> str:
    dims = "symint" if shape is None else f"{dtype}[{','.join(str(d) for d in shape)}]"
    return f"{name} {dims}" if name else dims


def _graph_inputs(graph: dict[str, Any], varying: set[int]) -> str:
    """The inputs that tell this graph from the others at its location (else the integer ones)."""
    inputs = graph["inputs"]
    picked = sorted(varying) or [i for i, spec in enumerate(inputs) if spec["dtype"].startswith(("int", "uint", "bool"))]
    shown = [_tensor(f"#{i}", inputs[i]["shape"], inputs[i]["dtype"]) for i in picked[:_TEXT_INPUTS]]
    rest = len(inputs) - len(shown)
    return " ".join(shown) + (f" (+{rest} more inputs)" if rest else "")


def _varying_inputs(graphs: list[dict[str, Any]]) -> set[int]:
    if len(graphs) < 2 or len({len(g["inputs"]) for g in graphs}) != 1:
        return set()
    return {i for i in range(len(graphs[0]["inputs"])) if len({json.dumps(g["inputs"][i]) for g in graphs}) > 1}


def _rank_lines(rank: dict[str, Any], report: dict[str, Any], label: str) -> list[str]:
    cost = report["graph_cost_seconds"]
    summary = (
        f"{label}: {rank['compiled_graphs']} compiled graph(s), {rank['eager_shapes']} eager forward shape(s)"
        f" -> about {_duration(rank['estimated_compile_seconds'])} of Neuron compilation at {_duration(cost)} each"
    )
    if rank["rejected_graphs"]:
        summary += f"; {rank['rejected_graphs']} graph(s) Neuron would REJECT (dynamic shapes)"
    lines = [summary]
    if rank["compiled"]:
        lines.append('  torch.compile graphs (backend "neuron"):')
    for group in rank["compiled"]:
        graphs = group["graphs"]
        lines.append(f"    {_where(group)}: {len(graphs)} graph(s)")
        varying = _varying_inputs(graphs)
        for graph in graphs[:_TEXT_ROWS]:
            flag = "  REJECTED: dynamic shapes" if graph["rejected"] else ""
            lines.append(f"      {graph['signature']}  {graph['ops']} ops  {_graph_inputs(graph, varying)}{flag}")
        if len(graphs) > _TEXT_ROWS:
            lines.append(f"      ... {len(graphs) - _TEXT_ROWS} more")
    if rank["eager"]:
        lines.append("  eager forward shapes (Neuron compiles a forward's ops again for each new input shape):")
    for entry in rank["eager"]:
        shapes = entry["shapes"]
        dropped = f" (+{entry['dropped_shapes']} calls with shapes beyond the first {len(shapes)})" if entry["dropped_shapes"] else ""
        lines.append(f"    {_where(entry)}: {len(shapes)} shape(s) in {entry['calls']} call(s){dropped}")
        for shape in shapes[:_TEXT_ROWS]:
            tensors = " ".join(_tensor(t["name"], t["shape"], t["dtype"]) for t in shape["inputs"]) or "(no tensor inputs)"
            lines.append(f"      {tensors}  x{shape['calls']}")
        if len(shapes) > _TEXT_ROWS:
            lines.append(f"      ... {len(shapes) - _TEXT_ROWS} more")
    if rank["dropped_calls"]:
        lines.append(f"    (+{rank['dropped_calls']} call(s) from further locations, not recorded)")
    if not rank["compiled"] and not rank["eager"]:
        lines.append("  nothing ran on the neuron device")
    for warning in rank["warnings"]:
        what = {"recompiles": "graphs", "eager_shapes": "eager shapes", "rejected": "rejected graphs"}[warning["kind"]]
        lines.append(f"  WARNING: {warning['shapes']} {what} at {warning['where']}")
        lines.extend(f"    {finding}" for finding in warning["findings"])
        lines.extend(f"    fix: {fix['message']}" for fix in warning["fixes"])
    return lines


def render_text(report: dict[str, Any]) -> str:
    cost = _duration(report["graph_cost_seconds"])
    lines = [f"neuroncompat simulate: {' '.join(report['command'])}"]
    if report["exit_code"] == 0:
        lines.append("the script finished (exit code 0)")
    else:
        lines.append(f"the script FAILED with exit code {report['exit_code']}: the counts cover what ran before it stopped")
    lines.append(
        f"estimated Neuron compilation: about {_duration(report['estimated_compile_seconds'])} "
        f"(distinct graphs x {cost}, --graph-cost; ranks compile in parallel)"
    )
    if not report["ranks"]:
        lines.append("nothing ran on the neuron device (or the script did not start)")
    ranks_seen = [r["rank"] for r in report["ranks"]]
    for rank in report["ranks"]:
        label = f"rank {rank['rank']}" + (f" (pid {rank['pid']})" if ranks_seen.count(rank["rank"]) > 1 else "")
        lines.append("")
        lines.extend(_rank_lines(rank, report, label))
    if report["missing_ranks"]:
        lines.append("")
        lines.append(f"no record from rank(s) {', '.join(map(str, report['missing_ranks']))}: killed before they could write one")
    return "\n".join(lines)
