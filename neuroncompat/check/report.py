"""``neuroncompat check``'s report: text for a terminal, JSON for tools, markdown for a PR.

The JSON's schema ships in the package, so a tool reading the report can validate it against the installed
version (``importlib.resources.files("neuroncompat.check") / "report.schema.json"``; ``"schema":
"neuroncompat.check/1"``, fields only ever added within a version), generated from
:mod:`~neuroncompat.check.report_types`. A stage's findings are the shared report model's
(:mod:`~neuroncompat.check.findings`), each rendered by the text and markdown renderers every command shares.
"""

from __future__ import annotations

import json
from typing import Any

from neuroncompat.check.findings import finding
from neuroncompat_report import markdown, text

_MARK = {"pass": "ok", "fail": "FAIL", "cpu-fails": "CPU too", "skipped": "skipped"}


def _stage_lines(stage: dict[str, Any]) -> list[str]:
    head = f"  {stage['stage']:<15} {_MARK[stage['status']]:<8}"
    if stage["status"] == "pass":
        lines = [f"{head} {stage['detail']}"]
    elif stage["status"] in ("fail", "cpu-fails"):
        lines = [f"{head} {stage['error']}"]
        lines += [f"{'':<26} at {stage[key]}" for key in ("model_line", "innermost") if stage.get(key)]
    else:
        return [f"{head} {stage['detail']}"]
    extra = [f"graphs compiled: {stage['graphs']}"] + [f"patch {p} acted" for p in stage["patches"]]
    lines.append(f"{'':<26} " + "; ".join(extra) + f"; {stage['seconds']} s")
    lines += [f"{'':<26} {text.line(finding(f))}" for f in stage["findings"]]
    lines += [f"{'':<26} {_recompile(r)}" for r in stage.get("recompiles", [])]
    return lines


def _recompile(r: dict[str, Any]) -> str:
    times = f" ({r['count']} times)" if r["count"] > 1 else ""
    return f"recompiled: guard `{r['guard']}` failed at {r['site']}{times}" + (
        f": {r['cause']}" if "cause" in r else ""
    )


def _sizes(result: dict[str, Any]) -> str:
    if not result["parameters"]:  # the model did not build: the load stage says why
        return "  no tiny model of the same architecture could be built from the config"
    layers = f"{result['layers']} layers, " if result["layers"] is not None else ""
    return f"  checked on a tiny random model of the same architecture: {layers}{result['parameters']:,} parameters"


def render_text(result: dict[str, Any]) -> str:
    verdict = "runs" if result["exit_code"] == 0 else "does not run as it is"
    lines = [
        f"{result['model']}: {result['architecture']} ({result['model_type']}, {result['dtype']}) {verdict} on the "
        f"simulated Neuron device",
        _sizes(result),
    ]
    for stage in result["stages"]:
        lines += _stage_lines(stage)
    return "\n".join(lines)


def render_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2)


def render_markdown(result: dict[str, Any]) -> str:
    lines = [
        f"### `{result['model']}`: {result['architecture']} ({result['model_type']}, {result['dtype']})",
        "",
        "| stage | result | graphs | findings | patches | detail |",
        "|---|---|---|---|---|---|",
    ]
    for s in result["stages"]:
        detail = s.get("detail") or s.get("error", "")
        if s.get("model_line"):
            detail += f" (at `{s['model_line']}`)"
        findings = "<br>".join(
            [markdown.line(finding(f)) for f in s.get("findings", [])]
            + [_recompile(r) for r in s.get("recompiles", [])]
        )
        findings = findings or "-"
        patches = ", ".join(s.get("patches", [])) or "-"
        lines.append(
            f"| {s['stage']} | {_MARK[s['status']]} | {s.get('graphs', '-')} | {findings} | {patches} | {detail} |"
        )
    return "\n".join(lines)


RENDERERS = {"text": render_text, "json": render_json, "markdown": render_markdown}
