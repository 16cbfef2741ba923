"""``neuroncompat simulate --format markdown``: the report as a pull-request comment.

A summary line, a per-rank table, then the findings to act on (each as every command's markdown gives a finding,
``neuroncompat_report.markdown``, beside its fix) and shape-churn warnings with their fixes,
a line counting the findings that need no change, and the verdict with the next command (``verdict.py``).
The first line is a hidden marker (not neuron-migrate's), so a CI job can post this and
``neuron-migrate --format markdown`` in one comment and find its own part again. Long lists are
cut to :data:`ROWS` rows per table (the JSON report has everything).
"""

from __future__ import annotations

from typing import Any

from neuroncompat.simulate import pipeline_report, verdict
from neuroncompat.simulate import report as simulate_report
from neuroncompat.simulate.durations import duration
from neuroncompat.simulate.findings import TITLES
from neuroncompat.simulate.findings import finding as shared_finding
from neuroncompat_report import markdown

MARKER = "<!-- neuroncompat simulate report -->"
ROWS = 50


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _status(report: dict[str, Any]) -> str:
    code = report["exit_code"]
    status = "the script finished" if code == 0 else f"**the script FAILED** (exit code {code})"
    strict = report["strict"]
    if strict["kinds"]:
        failed = f"; strict: **FAILED** ({len(strict['violations'])} finding(s))"
        status += failed if strict["violations"] else "; strict: passed"
    return status


def render(report: dict[str, Any]) -> str:
    ranks = report["ranks"]
    out = [
        MARKER + "\n",
        "## neuroncompat simulate\n\n",
        f"{markdown.code(' '.join(report['command']))}: {_status(report)}; about "
        f"**{duration(report['estimated_compile_seconds'])}** of Neuron compilation "
        f"({duration(report['graph_cost_seconds'])} a graph).\n",
    ]
    if not ranks:
        out.append("\nNothing ran on the neuron device.\n")
        return "".join(out)
    out.append(
        "\n| rank | compiled graphs | rejected | eager shapes | est. compile | graph breaks | data-dependent ops "
        "| CPU fallbacks | dtype findings |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    for rank in ranks:
        out.append(
            f"| {rank['rank']} | {rank['compiled_graphs']} | {rank['rejected_graphs']} | {rank['eager_shapes']} | "
            f"{duration(rank['estimated_compile_seconds'])} | {rank['graph_breaks']} | "
            f"{rank['data_dependent_ops']} | {rank['cpu_fallback_ops']} | {rank.get('dtype_findings', 0)} |\n"
        )
    if report["missing_ranks"]:
        missing = ", ".join(map(str, report["missing_ranks"]))
        out.append(f"\nNo record from rank(s) {missing}: killed before they could write one.\n")
    findings = [(rank["rank"], f) for rank in ranks for f in rank["findings"] if not f.get("informational")]
    if findings:
        out.append("\n### Findings\n\n| rank | finding | fix |\n|---|---|---|\n")
        strict = report["strict"]["kinds"]
        for rank, record in findings[:ROWS]:
            shown = markdown.line(shared_finding(record, strict))
            out.append(f"| {rank} | {shown} | {_cell(simulate_report.fix_text(record))} |\n")
        if len(findings) > ROWS:
            out.append(f"\n_{len(findings) - ROWS} more in the JSON report._\n")
        unknowns = {f["kind"]: f for _, f in findings if f.get("unknown")}
        for kind, finding in unknowns.items():
            out.append(f"\n{TITLES[kind].capitalize()}: unknown on trn2: {_cell(finding['unknown'])}.\n")
        if any(f["kind"] == "data_dependent" for _, f in findings):
            out.append(
                "\nData-dependent shapes can compile on trn2 and return wrong values with no error "
                "([aws-neuron-sdk#1381](https://github.com/aws-neuron/aws-neuron-sdk/issues/1381), reported "
                "against the XLA-based torch-neuronx; unknown for TorchNeuron).\n"
            )
    warnings = [(rank["rank"], w) for rank in ranks for w in rank["warnings"]]
    if warnings:
        out.append("\n### Recompilations\n\n")
        for rank, warning in warnings[:ROWS]:
            what = f"{warning['shapes']} {warning['kind'].replace('_', ' ')}"
            out.append(f"- rank {rank}: **{what}** at {markdown.code(warning['where'])}\n")
            out.extend(f"  - {_cell(finding)}\n" for finding in warning["findings"])
            out.extend(f"  - fix: {_cell(fix['message'])}\n" for fix in warning["fixes"])
    out.extend(_pipeline_calls(ranks))
    violations = report["strict"]["violations"]
    if violations:
        kinds = ", ".join(report["strict"]["kinds"])
        out.append(f"\n**Strict ({kinds}) failed** on {len(violations)} finding(s).\n")
    *info, last, following = verdict.lines(report, show_info=False)
    out.append("\n" + "".join(f"{_cell(line).replace('--show-info', '`--show-info`')}\n\n" for line in info))
    out.append(f"**{_cell(last)}**  \n{_cell(following)}\n")
    return "".join(out)


def _pipeline_calls(ranks: list[dict[str, Any]]) -> list[str]:
    """One row per diffusers pipeline call: its parameters, what it compiled, and why."""
    calls = [(rank["rank"], call) for rank in ranks for call in rank.get("pipeline_calls", ())]
    if not calls:
        return []
    out = [
        "\n### Diffusers pipeline calls\n\n| rank | call | where | parameters | new graphs | after step 1 | cause |\n"
        "|---|---|---|---|---|---|---|\n"
    ]
    for rank, call in calls[:ROWS]:
        causes = "; ".join(
            f"{c['param']} {c['before']} -> {c['after']}" if c["before"] is not None else c["param"].replace("_", " ")
            for c in call["causes"]
        )
        where = markdown.code(call["user"]) if call["user"] else ""
        out.append(
            f"| {rank} | #{call['index']} {call['pipeline']} | {_cell(where)} | "
            f"{_cell(pipeline_report.params_text(call['params']))} | {call['new_graphs']['total']} | "
            f"{len(call['later_step_compiles'])} | {_cell(causes) or '-'} |\n"
        )
    if len(calls) > ROWS:
        out.append(f"\n_{len(calls) - ROWS} more in the JSON report._\n")
    return out
