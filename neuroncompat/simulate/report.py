"""The ``neuroncompat simulate`` report: per rank, what Neuron would compile and what it would cost.

:func:`build` turns the per-process records (:mod:`neuroncompat.simulate.record`) into one
JSON-ready dict; :func:`render_text` prints it for reading, :func:`render_json` for tools
(:mod:`~neuroncompat.simulate.markdown` and :mod:`~neuroncompat.simulate.github` for CI). Both
are deterministic for a deterministic script (no timings, no absolute paths under site-packages
or the working directory).

JSON schema: ``docs/simulate-report.schema.json`` (``"schema": "neuroncompat.simulate/1"``; fields
are only ever added), generated from :mod:`~neuroncompat.simulate.report_types`. Per rank: the compiled graphs grouped by compiled function and location,
their inputs named as the user's code names them; the eager forward shapes per module and
location; ``warnings`` where a location churns shapes (with the fixes from
:mod:`~neuroncompat.simulate.advice`) or compiles graphs Neuron rejects; and ``findings``: graph
breaks, data-dependent-shape ops, CPU-fallback ops, and complex, float64 and int64 tensors on the device
(:mod:`~neuroncompat.simulate.dtype_findings`; ``unknown`` says what TorchNeuron leaves undocumented) per
user line, each with its fix; and ``hub_kernels``: the layers ``kernelize`` replaced with a Neuron
kernel's forward. At the top, ``strict``: the kinds ``--strict`` fails on (selectable:
:data:`STRICT_KINDS`; ``--strict`` alone: :data:`STRICT_DEFAULT`) and what it failed on;
``exit_code`` is the script's, ``simulate_exit_code`` the command's (:func:`exit_code_of`).

A location is the *site* (the innermost caller outside torch and neuroncompat, often library
code such as ``transformers/generation/utils.py``) and the *user* line (the innermost caller in
the user's own files); see :mod:`neuroncompat.simulate.locations`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neuroncompat.simulate import dtype_findings, graph_breaks, op_findings, op_support, pipeline_report, verdict
from neuroncompat.simulate.advice import DYNAMIC_SHAPES, Tensor, diagnose
from neuroncompat.simulate.durations import duration
from neuroncompat.simulate.findings import finding as shared_finding
from neuroncompat.simulate.kinds import (
    DEFAULT_GRAPH_COST,
    DEFAULT_MAX_SHAPES,
    FINDING_KINDS,
    STRICT_EXIT_CODE,
    STRICT_KINDS,
)
from neuroncompat_report import text
from neuroncompat_report.places import split_location

SCHEMA = "neuroncompat.simulate/1"
# Rows of shapes the text report shows per location (the JSON has them all).
_TEXT_ROWS = 8
_TEXT_INPUTS = 4


def load_records(directory: str | Path) -> list[dict[str, Any]]:
    """The records the processes wrote, by rank then pid."""
    records = [json.loads(path.read_text()) for path in Path(directory).glob("rank*.json")]
    return sorted(records, key=lambda r: (r["rank"], r["pid"]))


def _input_name(spec: dict[str, Any], index: int) -> str:
    return spec.get("name") or f"#{index}"


def _compiled_tensors(graph: dict[str, Any]) -> list[Tensor]:
    return [(_input_name(spec, i), spec["shape"], spec["dtype"]) for i, spec in enumerate(graph["inputs"])]


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
        "site": entry["site"],
        "user": entry["user"],
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


def _findings(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's findings (graph breaks, data-dependent ops, CPU fallbacks, dtypes), each with its fix."""
    out = []
    for raw in _merged_dtype_findings(record.get("findings", ())):
        kind, what = raw["kind"], raw["what"]
        unknown = None
        if kind == "graph_break":
            fix: Any = graph_breaks.fix_for(what)
            description, references = what, []
        elif kind == "data_dependent":
            fix = op_findings.fix_for(kind, what)
            description, references = f"{op_findings.describe(what)} [{what}]", [op_findings.WRONG_VALUES]
        elif kind in dtype_findings.KINDS:
            entry = dtype_findings.KINDS[kind]
            fix = op_findings.OpFix(entry.fix_id, entry.fix)
            description, references, unknown = (
                dtype_findings.describe(kind, what),
                list(entry.references),
                entry.unknown,
            )
        else:
            fix = op_findings.fix_for(kind, what)
            description, references = f"{what} runs on the CPU in TorchNeuron", [op_support.TABLE]
        if raw["graph"]:
            description += f" (in compiled graph {raw['graph']})"
        out.append(
            {
                "kind": kind,
                "what": what,
                "description": description,
                "where": raw["user"] or raw["site"] or "<unknown>",
                "site": raw["site"],
                "user": raw["user"],
                "graph": raw["graph"],
                "count": raw["count"],
                "owner": owner_of(raw["site"], raw["user"]),
                "fix": {"id": fix.id, "message": fix.message},
                "references": references,
                "unknown": unknown,
                "informational": kind in dtype_findings.NOT_STRICT_BY_DEFAULT,
            }
        )
    return sorted(out, key=lambda f: (FINDING_KINDS.index(f["kind"]), f["where"], f["what"]))


def _merged_dtype_findings(raws: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One complex/float64 finding per user line and graph, naming every op there (``torch.ones(...,
    dtype=torch.float64)`` makes a tensor with ``empty`` and fills it with ``fill_``: one line to fix)."""
    out: list[dict[str, Any]] = []
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for raw in raws:
        if raw["kind"] not in ("complex_on_device", "fp64_on_device"):
            out.append(raw)
            continue
        key = (raw["kind"], raw["site"], raw["user"], raw["graph"])
        if key in merged:
            merged[key]["what"] += f", {raw['what']}"
            merged[key]["count"] += raw["count"]
        else:
            merged[key] = dict(raw)
            out.append(merged[key])
    return out


def owner_of(site: str | None, user: str | None) -> str | None:
    """The package whose code holds a finding that is not in the user's code, e.g. ``trl``.

    The site is the innermost caller outside torch and neuroncompat, the user line the innermost one
    outside every installed library; when they differ the site is library code, and its path is shortened
    relative to site-packages, so its first component names the package. Found running TRL's GRPO script:
    seven findings inside ``trl`` told the user to edit code they do not own.
    """
    place = split_location(site)
    if place is None or site == user:
        return None
    return re.split(r"[/\\]", place[0])[0].removesuffix(".py") or None


def fix_text(finding: dict[str, Any]) -> str:
    """The fix line of a finding: in library code, addressed to that library's maintainers.

    Never for an informational finding: nothing needs changing there, so nothing is a bug to report.
    """
    message = finding["fix"]["message"]
    owner = finding.get("owner")
    if owner is None or finding.get("informational"):
        return message
    return f"in {owner}'s code, not yours: report it to {owner} (the fix there: {message})"


def _rank(record: dict[str, Any], graph_cost: float, max_shapes: int) -> dict[str, Any]:
    compiled = _compiled_groups(record["compiled"])
    warnings: list[dict[str, Any]] = []
    for group in compiled:
        accepted = [g for g in group["graphs"] if not g["rejected"]]
        rejected = [g for g in group["graphs"] if g["rejected"]]
        if rejected:
            warnings.append(
                {
                    "kind": "rejected",
                    "where": _where(group),
                    "site": group["site"],
                    "user": group["user"],
                    "shapes": len(rejected),
                    "findings": [f"{len(rejected)} graph(s) with dynamic shapes: the Neuron backend rejects them"],
                    "fixes": [{"id": DYNAMIC_SHAPES.id, "message": DYNAMIC_SHAPES.message}],
                }
            )
        if len(accepted) > max_shapes:
            warnings.append(_warning("recompiles", group, [_compiled_tensors(g) for g in accepted]))
    for entry in record["eager"]:
        if len(entry["shapes"]) > max_shapes:
            warnings.append(_warning("eager_shapes", entry, [_eager_tensors(s) for s in entry["shapes"]]))
    signatures = {g["signature"]: g["rejected"] for group in compiled for g in group["graphs"]}
    compiled_graphs = sum(1 for rejected in signatures.values() if not rejected)
    eager_shapes = len({(e["module"], json.dumps(s["inputs"])) for e in record["eager"] for s in e["shapes"]})
    findings = _findings(record)
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
        "device_allocations": record.get("device_allocations", 0),
        "warnings": warnings,
        "graph_breaks": sum(1 for f in findings if f["kind"] == "graph_break"),
        "data_dependent_ops": sum(1 for f in findings if f["kind"] == "data_dependent"),
        "cpu_fallback_ops": sum(1 for f in findings if f["kind"] == "cpu_fallback"),
        "dtype_findings": sum(1 for f in findings if f["kind"] in dtype_findings.KINDS),
        "findings": findings,
        "dropped_findings": record.get("dropped_findings", 0),
        "hub_kernels": record.get("hub_kernels", []),
        "pipeline_calls": pipeline_report.calls(record),
    }


def _violations(ranks: list[dict[str, Any]], kinds: Sequence[str]) -> list[dict[str, Any]]:
    """What ``--strict`` fails on: each warning and finding of a selected kind, per rank."""
    out = []
    for rank in ranks:
        for warning in rank["warnings"]:
            kind = "rejected" if warning["kind"] == "rejected" else "shape_churn"
            if kind in kinds:
                what = f"{warning['shapes']} {warning['kind']}"
                out.append({"rank": rank["rank"], "kind": kind, "where": warning["where"], "what": what})
        for finding in rank["findings"]:
            if finding["kind"] in kinds:
                what = finding["description"]
                out.append({"rank": rank["rank"], "kind": finding["kind"], "where": finding["where"], "what": what})
        for call in rank.get("pipeline_calls", ()):
            if call["later_step_compiles"] and "step_recompile" in kinds:
                what = f"{len(call['later_step_compiles'])} graph(s) or eager shape(s) compiled after step 1"
                where = call["user"] or call["pipeline"]
                out.append({"rank": rank["rank"], "kind": "step_recompile", "where": where, "what": what})
    return out


def exit_code_of(report: dict[str, Any]) -> int:
    """The exit status of ``neuroncompat simulate``: the script's when it failed (it wins), else
    :data:`STRICT_EXIT_CODE` when ``--strict`` found a selected kind, else 0."""
    if report["exit_code"] != 0:
        return report["exit_code"]
    return STRICT_EXIT_CODE if report["strict"]["violations"] else 0


def build(
    records: list[dict[str, Any]],
    command: Sequence[str],
    exit_code: int,
    graph_cost: float = DEFAULT_GRAPH_COST,
    max_shapes: int = DEFAULT_MAX_SHAPES,
    strict: Sequence[str] = (),
) -> dict[str, Any]:
    """The report for one simulated run (the JSON schema in the module docstring); ``strict``
    selects the kinds (:data:`STRICT_KINDS`) that fail the run."""
    unknown = sorted(set(strict) - set(STRICT_KINDS))
    if unknown:
        raise ValueError(f"unknown strict kind(s) {', '.join(unknown)}; expected some of {', '.join(STRICT_KINDS)}")
    ranks = [_rank(record, graph_cost, max_shapes) for record in records]
    world = max((r["world_size"] for r in records), default=0)
    seen = {r["rank"] for r in records}
    built = {
        "schema": SCHEMA,
        "command": list(command),
        "exit_code": exit_code,
        "graph_cost_seconds": graph_cost,
        "max_shapes": max_shapes,
        "estimated_compile_seconds": max((r["estimated_compile_seconds"] for r in ranks), default=0.0),
        "missing_ranks": [rank for rank in range(world) if rank not in seen],
        "strict": {"kinds": [k for k in STRICT_KINDS if k in strict], "violations": _violations(ranks, strict)},
        "ranks": ranks,
        "pipeline_latents": pipeline_report.latents_across_ranks(ranks),
    }
    built["simulate_exit_code"] = exit_code_of(built)
    return built


def render_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2)


# -- text -------------------------------------------------------------------------------------
def _tensor(name: str | None, shape: Sequence[int | str] | None, dtype: str) -> str:
    dims = "symint" if shape is None else f"{dtype}[{','.join(str(d) for d in shape)}]"
    return f"{name} {dims}" if name else dims


def _graph_inputs(graph: dict[str, Any], varying: set[int]) -> str:
    """The inputs that tell this graph from the others at its location, else the ones that are not
    parameters or buffers (the same every call), by name."""
    inputs = graph["inputs"]
    data = [i for i, spec in enumerate(inputs) if not spec.get("parameter")]
    shown = (sorted(varying) or data or list(range(len(inputs))))[:_TEXT_INPUTS]
    hidden_data = sum(1 for i in data if i not in shown)
    hidden_parameters = len(inputs) - len(data) - sum(1 for i in shown if inputs[i].get("parameter"))
    more = [f"+{hidden_data} more inputs"] if hidden_data else []
    if hidden_parameters:
        more.append(f"+{hidden_parameters} parameters/buffers")
    text = " ".join(_tensor(_input_name(inputs[i], i), inputs[i]["shape"], inputs[i]["dtype"]) for i in shown)
    return text + (f" ({', '.join(more)})" if more else "")


def _varying_inputs(graphs: list[dict[str, Any]]) -> set[int]:
    if len(graphs) < 2 or len({len(g["inputs"]) for g in graphs}) != 1:
        return set()
    return {i for i in range(len(graphs[0]["inputs"])) if len({json.dumps(g["inputs"][i]) for g in graphs}) > 1}


def _rank_lines(rank: dict[str, Any], report: dict[str, Any], label: str, show_info: bool) -> list[str]:
    cost = report["graph_cost_seconds"]
    summary = (
        f"{label}: {rank['compiled_graphs']} compiled graph(s), {rank['eager_shapes']} eager forward shape(s)"
        f" -> about {duration(rank['estimated_compile_seconds'])} of Neuron compilation at {duration(cost)} each"
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
        dropped = (
            f" (+{entry['dropped_shapes']} calls with shapes beyond the first {len(shapes)})"
            if entry["dropped_shapes"]
            else ""
        )
        lines.append(f"    {_where(entry)}: {len(shapes)} shape(s) in {entry['calls']} call(s){dropped}")
        for shape in shapes[:_TEXT_ROWS]:
            tensors = (
                " ".join(_tensor(t["name"], t["shape"], t["dtype"]) for t in shape["inputs"]) or "(no tensor inputs)"
            )
            lines.append(f"      {tensors}  x{shape['calls']}")
        if len(shapes) > _TEXT_ROWS:
            lines.append(f"      ... {len(shapes) - _TEXT_ROWS} more")
    if rank["dropped_calls"]:
        lines.append(f"    (+{rank['dropped_calls']} call(s) from further locations, not recorded)")
    if rank.get("hub_kernels"):
        lines.append(
            "  Hub kernels (Neuron layer mappings; a trn2 runs the kernel, the simulator ran each layer's own forward):"
        )
    for found in rank.get("hub_kernels", ()):
        lines.append(
            f"    {found['layer']}: {found['layers']} {found['module']} layer(s) -> {found['kernel']} from {found['repo']}"
        )
    if not rank["compiled"] and not rank["eager"]:
        if rank.get("device_allocations"):
            lines.append(
                f"  no compiled graph and no module forward on the neuron device; {rank['device_allocations']} "
                "allocation(s) on it (ops outside a module's forward are not counted here)"
            )
        else:
            lines.append("  nothing ran on the neuron device")
    for warning in rank["warnings"]:
        what = {"recompiles": "graphs", "eager_shapes": "eager shapes", "rejected": "rejected graphs"}[warning["kind"]]
        lines.append(f"  WARNING: {warning['shapes']} {what} at {warning['where']}")
        lines.extend(f"    {finding}" for finding in warning["findings"])
        lines.extend(f"    fix: {fix['message']}" for fix in warning["fixes"])
    explained: set[str] = set()
    for record in rank["findings"]:
        if record.get("informational") and not show_info:
            continue  # counted on one line at the end (verdict.py)
        lines.append(f"  {text.line(shared_finding(record, report['strict']['kinds']))}")
        lines.append(f"    fix: {fix_text(record)}")
        if record.get("unknown") and record["kind"] not in explained:  # once per kind: the same text
            explained.add(record["kind"])
            lines.append(f"    unknown on trn2: {record['unknown']} ({' '.join(record['references'])})")
        if record["kind"] == "data_dependent":
            lines.append(
                "    risk: a data-dependent shape can compile on trn2 and return wrong values with no error "
                f"({op_findings.WRONG_VALUES}, reported against the XLA-based torch-neuronx; unknown for TorchNeuron)"
            )
    if rank.get("dropped_findings"):
        lines.append(f"  (+{rank['dropped_findings']} finding(s) at further locations, not recorded)")
    lines.extend(pipeline_report.render_lines(rank.get("pipeline_calls", [])))
    return lines


def render_text(report: dict[str, Any], show_info: bool = False) -> str:
    """The report for reading, ending on the verdict and the next command (``verdict.py``); findings that
    need no change are counted there, and listed with their rank's findings only with ``show_info``."""

    lines = [f"neuroncompat simulate: {' '.join(report['command'])}"]
    if report["exit_code"] != 0:  # a success is the verdict's to say, at the end
        lines.append(
            f"the script FAILED with exit code {report['exit_code']}: the counts cover what ran before it stopped"
        )
    if not report["ranks"]:
        lines.append("nothing ran on the neuron device (or the script did not start)")
    ranks_seen = [r["rank"] for r in report["ranks"]]
    for rank in report["ranks"]:
        label = f"rank {rank['rank']}" + (f" (pid {rank['pid']})" if ranks_seen.count(rank["rank"]) > 1 else "")
        lines.append("")
        lines.extend(_rank_lines(rank, report, label, show_info))
    if report["missing_ranks"]:
        lines.append("")
        lines.append(
            f"no record from rank(s) {', '.join(map(str, report['missing_ranks']))}: killed before they could write one"
        )
    latents = pipeline_report.render_latents(report.get("pipeline_latents"))
    if latents:
        lines.append("")
        lines.extend(latents)
    strict = report["strict"]
    if strict["kinds"]:
        lines.append("")
        if strict["violations"]:
            kinds = sorted({v["kind"] for v in strict["violations"]}, key=STRICT_KINDS.index)
            outcome = f"FAILED: {len(strict['violations'])} finding(s) of kind {', '.join(kinds)}"
            if report["exit_code"] == 0:
                outcome += f" (exit code {STRICT_EXIT_CODE})"
            else:
                outcome += f" (the script's exit code {report['exit_code']} is kept)"
        else:
            outcome = "passed"
        lines.append(f"strict ({', '.join(strict['kinds'])}): {outcome}")
    if "cuda_redirect" in report:
        from neuroncompat.simulate import redirect_log

        lines.append("")
        lines.extend(redirect_log.render_text(report["cuda_redirect"]).splitlines())
    lines.append("")
    lines.extend(verdict.lines(report, show_info))
    return "\n".join(lines)
