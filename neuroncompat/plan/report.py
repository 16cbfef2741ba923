"""A plan as a JSON document (docs/plan.schema.json) and as the text a user reads on a terminal.

The document is built once (:func:`build`) and each renderer only formats it, so the text never says something
the JSON does not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from neuroncompat.plan import layouts
from neuroncompat.plan.hardware import GIB, Core
from neuroncompat.plan.layouts import Row
from neuroncompat.plan.parallel import Layout
from neuroncompat.plan.trace import Trace
from neuroncompat_report.exits import FAILED, OK

SCHEMA = "neuroncompat.plan/1"
NOT_MODELLED = (
    "the Neuron compiler's workspace and the compiled graph's own buffers",
    "allocator fragmentation and caching (the peak is of live tensors)",
    "collective-communication buffers beyond FSDP2's all-gather and reduce-scatter outputs (the collective "
    "library's own staging), and TP's collectives' outputs are counted as the activations they are",
)


class Settings(Protocol):
    """What a plan was asked for (:class:`neuroncompat.plan.settings.PlanSettings`) or what a script's step turned out to be
    (neuroncompat/plan/script.py), under the same field names."""

    def as_dict(self) -> dict[str, Any]: ...


def build(
    model: str, config_path: Path, config: Any, settings: Settings, trace: Trace, core: Core, layout: Layout
) -> dict:
    """The plan document: the step, its peak per NeuronCore by category and phase, and the verdict."""
    fits = trace.peak_bytes <= core.memory_bytes
    return {
        "schema": SCHEMA,
        "model": model,
        "config": str(config_path),
        "model_type": str(getattr(config, "model_type", "")),
        "parameter_count": trace.parameter_count,
        "settings": settings.as_dict(),
        "layout": layout.as_dict(),
        "core": {"instance": core.name, "memory_bytes": core.memory_bytes, "what": core.note},
        "per_core": {
            "peak_bytes": trace.peak_bytes,
            "phase": trace.phase,
            "categories": trace.categories,
            "phase_peaks": trace.phase_peaks,
            "kv_cache_bytes": trace.kv_cache_bytes,
        },
        "largest_tensors": [
            {
                "op": made.op,
                "shape": list(made.shape),
                "dtype": made.dtype,
                "phase": made.phase,
                "bytes": made.nbytes,
                "count": made.count,
            }
            for made in trace.largest
        ],
        "largest_parameters": [{"name": name, "bytes": size} for name, size in trace.parameters],
        "fits": fits,
        "headroom_bytes": core.memory_bytes - trace.peak_bytes,
        "layouts": None,
        "not_modelled": list(NOT_MODELLED),
        "exit_code": OK if fits else FAILED,
    }


def layout_table(rows: list[Row], core: Core) -> dict:
    """The searched layouts (neuroncompat/plan/layouts.py) as the document's ``layouts`` section."""

    def column(trace: Trace) -> dict:
        return {"peak_bytes": trace.peak_bytes, "phase": trace.phase, "fits": trace.peak_bytes <= core.memory_bytes}

    def named(row: Row | None) -> dict | None:
        return None if row is None else row.layout.as_dict()

    return {
        "instance": core.instance,
        "instance_cores": core.instance_cores,
        "rows": [
            {**row.layout.as_dict(), "plain": column(row.plain), "checkpointed": column(row.checkpointed)}
            for row in rows
        ],
        "smallest": named(layouts.smallest(rows, core.memory_bytes, checkpointed=False)),
        "smallest_checkpointed": named(layouts.smallest(rows, core.memory_bytes, checkpointed=True)),
        "traced_up_to_cores": rows[-1].layout.cores,
    }


def render_json(plan: dict) -> str:
    return json.dumps(plan, indent=2)


def _gib(size: int) -> str:
    """A size in GiB, or in MiB below one GiB (a tiny model's figures would all read 0.00 GiB)."""
    return f"{size / GIB:.2f} GiB" if abs(size) >= GIB else f"{size / (1 << 20):.1f} MiB"


def _layout(layout: dict) -> str:
    if layout["cores"] == 1:
        return "1 NeuronCore (no TP, no FSDP)"
    return f"{layout['cores']} NeuronCores (TP {layout['tp']} x FSDP {layout['fsdp']}), planned for rank 0"


def render_text(plan: dict) -> str:
    """The verdict first, then where the memory goes: what a user deciding on an instance reads."""
    s, per_core, core = plan["settings"], plan["per_core"], plan["core"]
    step = (
        f"train, {s['optimizer']}" + (", gradient checkpointing" if s["gradient_checkpointing"] else "")
        if s["task"] == "train"
        else f"generate, static cache {s['seq_len'] + s['max_new_tokens']} positions"
        if "script" not in plan
        else f"generate ({s['max_new_tokens']} new tokens asked; the script's own cache): prefill and one decode step"
    )
    precision = s["dtype"] + (f", autocast {s['autocast']}" if s["autocast"] else "")
    verdict = "fits" if plan["fits"] else "does NOT fit"
    lines = [
        f"neuroncompat plan: {plan['model']} ({plan['model_type']}, {plan['parameter_count'] / 1e9:.2f}B parameters)",
        f"step: {step}; batch {s['batch_size']} x {s['seq_len']} tokens{' per rank' if plan['layout']['cores'] > 1 else ''}; {precision}; {_layout(plan['layout'])}",
        *_script_lines(plan),
        "",
        f"peak per NeuronCore: {_gib(per_core['peak_bytes'])} in {per_core['phase']}: {verdict} in "
        f"{_gib(core['memory_bytes'])} ({core['instance']}: {core['what']}), headroom {_gib(plan['headroom_bytes'])}",
        "",
        "at the peak, by category:",
    ]
    for name, size in per_core["categories"].items():
        if size:
            lines.append(f"  {name:<22}{_gib(size):>12}")
    if per_core["kv_cache_bytes"] is not None:
        cache = "the static KV cache" if "script" not in plan else "the KV cache at the decode step"
        lines.append(f"  (of the activations, {cache}: {_gib(per_core['kv_cache_bytes'])})")
    lines += ["", "peak by the end of each phase:"]
    lines += [f"  {phase:<22}{_gib(size):>12}" for phase, size in per_core["phase_peaks"].items()]
    lines += ["", "largest tensors the step makes:"]
    for made in plan["largest_tensors"]:
        shape = "x".join(str(n) for n in made["shape"])
        times = f" (x{made['count']})" if made["count"] > 1 else ""
        lines.append(f"  {_gib(made['bytes']):>12}  {made['op']} {shape} {made['dtype']} in {made['phase']}{times}")
    lines += ["largest parameters:"]
    lines += [f"  {_gib(p['bytes']):>12}  {p['name']}" for p in plan["largest_parameters"]]
    if plan["layouts"] is not None:
        lines += ["", *_table_lines(plan["layouts"], core)]
    lines += _graph_lines(plan)
    lines += ["", "not modelled: " + "; ".join(plan["not_modelled"]) + " (docs/plan.md)"]
    return "\n".join(lines)


def _graph_lines(plan: dict) -> list[str]:
    """With ``--graphs``: how many graphs Neuron would compile for the step under ``torch.compile(model)``."""
    graphs = plan.get("graphs")
    if graphs is None:
        return []
    count = graphs["count"]
    lines = [
        "",
        f"torch.compile(model) graphs, traced by Dynamo on fake inputs: {count} Neuron compilation"
        f"{'s' if count != 1 else ''}{' (graph breaks split the forward)' if count > 1 else ''}",
    ]
    lines += [f"  {graph['ops']:>6} ops  {graph['code']}" for graph in graphs["graphs"]]
    return lines


def _script_lines(plan: dict) -> list[str]:
    """For ``plan -- python SCRIPT``: where the script was stopped, and each value read the plan answered."""
    script = plan.get("script")
    if script is None:
        return []
    after = "its first optimizer step" if plan["settings"]["task"] == "train" else "the first decode step"
    lines = [f"script: stopped after {after}, at {script['stopped_at'] or 'a line outside it'}"]
    lines += [f"  answered {read['site']}: {read['why']}" for read in script["answered_reads"]]
    return lines


def _table_lines(table: dict, core: dict) -> list[str]:
    """The layout table: each traced layout's per-core peak without and with gradient checkpointing."""

    def cell(column: dict) -> str:
        return f"{_gib(column['peak_bytes'])} {'fits' if column['fits'] else 'no'}"

    def name(layout: dict | None) -> str:
        return (
            "none"
            if layout is None
            else f"TP {layout['tp']} x FSDP {layout['fsdp']} ({layout['cores']} core{'s' if layout['cores'] > 1 else ''})"
        )

    lines = [
        f"layouts on one {table['instance']} ({table['instance_cores']} cores of {_gib(core['memory_bytes'])}), "
        "peak per core:",
        f"  {'TP':>3} {'FSDP':>5} {'cores':>6}  {'plain':>18}  {'checkpointed':>18}",
    ]
    for row in table["rows"]:
        lines.append(
            f"  {row['tp']:>3} {row['fsdp']:>5} {row['cores']:>6}  {cell(row['plain']):>18}  "
            f"{cell(row['checkpointed']):>18}"
        )
    lines += [
        f"smallest that fits: {name(table['smallest'])}; with gradient checkpointing: "
        f"{name(table['smallest_checkpointed'])}",
        f"(layouts over more than {table['traced_up_to_cores']} cores not traced: they shard the same step further)"
        if table["traced_up_to_cores"] < table["instance_cores"]
        else "(every layout over the instance traced)",
    ]
    return lines


def render_markdown(plan: dict) -> str:
    """The plan as a pull-request comment or a notebook cell: the verdict, then the same figures as tables."""
    s, per_core, core = plan["settings"], plan["per_core"], plan["core"]
    training = "LoRA r=" + str(s["lora_r"]) if s["lora_r"] else "full fine-tuning"
    cache = "the script's own cache" if "script" in plan else "static cache"
    step = f"{s['task']}, {training if s['task'] == 'train' else cache}, {s['dtype']}" + (
        ", gradient checkpointing" if s["gradient_checkpointing"] else ""
    )
    verdict = "fits" if plan["fits"] else "does **not** fit"
    lines = [
        f"### `neuroncompat plan`: {plan['model']} ({plan['model_type']}, {plan['parameter_count'] / 1e9:.2f}B)",
        "",
        f"{step}; batch {s['batch_size']} x {s['seq_len']} tokens; {_layout(plan['layout'])}.",
        *[f"\n{line.strip()}" for line in _script_lines(plan)],
        "",
        f"**Peak per NeuronCore: {_gib(per_core['peak_bytes'])}** in {per_core['phase']}: {verdict} in "
        f"{_gib(core['memory_bytes'])} ({core['instance']}), headroom {_gib(plan['headroom_bytes'])}.",
        "",
        "| at the peak | size |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {_gib(size)} |" for name, size in per_core["categories"].items() if size]
    lines += ["", "| by the end of | peak |", "|---|---:|"]
    lines += [f"| {phase} | {_gib(size)} |" for phase, size in per_core["phase_peaks"].items()]
    lines += ["", "| largest tensors | op | shape | dtype | phase |", "|---:|---|---|---|---|"]
    for made in plan["largest_tensors"]:
        shape = "x".join(str(n) for n in made["shape"])
        lines.append(f"| {_gib(made['bytes'])} | `{made['op']}` | {shape} | {made['dtype']} | {made['phase']} |")
    if plan["layouts"] is not None:
        table = plan["layouts"]
        lines += [
            "",
            f"Layouts on one {table['instance']} ({table['instance_cores']} cores), peak per core:",
            "",
            "| TP | FSDP | cores | plain | gradient checkpointing |",
            "|---:|---:|---:|---:|---:|",
        ]
        for row in table["rows"]:
            cells = [
                f"{_gib(row[c]['peak_bytes'])} {'fits' if row[c]['fits'] else 'no'}" for c in ("plain", "checkpointed")
            ]
            lines.append(f"| {row['tp']} | {row['fsdp']} | {row['cores']} | {cells[0]} | {cells[1]} |")
    if plan.get("graphs") is not None:
        lines += ["", f"torch.compile(model): **{plan['graphs']['count']}** graph(s) for Neuron to compile.", ""]
        lines += ["| ops | graph of |", "|---:|---|"]
        lines += [f"| {graph['ops']} | `{graph['code']}` |" for graph in plan["graphs"]["graphs"]]
    lines += ["", "Not modelled (docs/plan.md):", *[f"- {item}" for item in plan["not_modelled"]]]
    return "\n".join(lines)


RENDERERS = {"text": render_text, "json": render_json, "markdown": render_markdown}
