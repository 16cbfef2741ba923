"""``neuroncompat check`` over the causal-LM architectures of the installed transformers: the project's own table.

For each ``model_type`` in transformers' causal-LM auto mapping (or those named with ``--only``), the
architecture's default config (``AutoConfig.for_model``, the sizes of its reference checkpoint) is saved as a
user's model directory would hold it and checked (:mod:`neuroncompat.check`: tiny model, simulated device,
shim; load, generate, train eager and compiled, each against the CPU). Results go to a JSON file as they come
(``--results``; a rerun skips what it holds, so the run is resumable) and the table to ``docs/architectures.md``
(``--table``): one row per architecture with each stage's result and the first failure's error and source
line, then the totals and the time the run took.

Rows are kept: the table is read back first (:func:`read_table`) and the architectures checked now replace their
rows, so ``--only doge,phimoe`` refreshes two rows and the totals without the 44-minute full run (a row whose
model type left the mapping is dropped). A failure whose cause has been read is named in its row (:data:`CAUSES`).

:data:`CI_SUBSET` is the dozen architectures the suite checks against this table (tests/test_architectures_table.py):
dense, MoE, sliding-window, hybrid and linear attention, state-space, multimodal text backbones.
``--per-process N`` checks N architectures in one worker process (:func:`neuroncompat.check.check_many`): each
then skips the process's start; the default, 1, keeps a hang or crash to one architecture. The ``s`` column is
each check's own time, process start included with 1 per process.

``python bench/bench_architectures.py [--only llama,qwen3_moe | --ci-subset] [--limit N] [--workers 2]
[--per-process 1] [--timeout 180] [--results bench/architectures.json] [--table docs/architectures.md]``
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from neuroncompat.check import CheckError, check_many

STAGES = ("load", "generate", "train-eager", "train-compiled")

# model_type -> what it stands for in the suite's check of this table: each passes every stage in docs/architectures.md.
# The suite checks each half ([0::2], [1::2]) in one worker process; the order balances them: the slowest, gemma3_text
# (19 s in a warm process: its sliding layers recompile at each decode step), with the five fastest (2 s each), and
# the six others (3 to 6 s each) in the other half.
CI_SUBSET: dict[str, str] = {
    "gemma3_text": "5 sliding-window layers to 1 full-attention layer",
    "gpt_oss": "MoE, attention sinks, alternating sliding and full attention",
    "lfm2": "hybrid: short convolutions and attention",
    "qwen3_5_text": "hybrid: gated delta-net linear attention and full attention",
    "minimax_m3_vl_text": "the text backbone of a vision-language model",
    "mamba": "state-space model, no attention",
    "phi3": "dense, fused qkv and gate-up projections",
    "jamba": "hybrid: Mamba, attention and MoE layers",
    "phimoe": "MoE that samples its experts in training (sparsemixer): random draws in the step",
    "llama": "dense, the reference decoder",
    "deepseek_v3": "MoE with grouped routing and a shared expert, multi-head latent attention",
    "qwen3_moe": "MoE through transformers' grouped experts",
}

# model_type -> (text its failure still holds, the cause read in the code): written in its row while both hold
CAUSES: dict[str, tuple[str, str]] = {}


def architectures() -> dict[str, str]:
    """``model_type`` -> causal-LM class name, from the installed transformers."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return {k: (v if isinstance(v, str) else v[0]) for k, v in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items())}


def check_group(model_types: list[str], classes: dict[str, str], timeout: float) -> list[dict[str, Any]]:
    """One entry per model type, checked in one worker process (:func:`neuroncompat.check.check_many`).

    Each default config is saved as a user's model directory holds it. ``seconds`` is each check's own time in
    the worker; for a group of one it is the whole check, the process's start included, as a user waits for it.
    """
    from transformers import AutoConfig

    start = time.perf_counter()
    entries = {t: {"model_type": t, "class": classes[t]} for t in model_types}
    with tempfile.TemporaryDirectory(prefix="arch-") as scratch:
        directories = {}
        for model_type in model_types:
            try:
                config = AutoConfig.for_model(model_type)
                config.architectures = [classes[model_type]]
                directories[model_type] = Path(scratch) / model_type
                config.save_pretrained(directories[model_type])
            except Exception as exc:  # the default config itself cannot be built: a row, not a crash of the bench
                entries[model_type]["error"] = (
                    f"transformers refuses its own default config: {type(exc).__name__}: {exc}"[:300]
                )
                entries[model_type]["seconds"] = 0.0
        checked = [t for t in model_types if t in directories]
        try:
            results: list[dict[str, Any] | CheckError] = check_many([str(directories[t]) for t in checked], timeout)
        except CheckError as exc:  # the group as a whole timed out
            results = [CheckError(f"{directories[t]}: {str(exc).split(': ', 1)[-1]}") for t in checked]
        for model_type, result in zip(checked, results):
            entry = entries[model_type]
            if isinstance(result, CheckError):  # its message starts with the scratch directory: name the model type
                message = str(result).replace(str(directories[model_type]), model_type, 1)
                entry["error"] = message.splitlines()[0][:300]
                entry["detail"] = "\n".join(message.splitlines()[1:])[-1500:]
            else:
                entry["report"] = result  # the whole report, as `neuroncompat check --format json` prints it
                entry["stages"] = result["stages"]
                entry["parameters"] = result.get("parameters")
                entry["seconds"] = result["seconds"]
    whole = round(time.perf_counter() - start, 1)
    for entry in entries.values():
        if len(model_types) == 1 or "seconds" not in entry:
            entry["seconds"] = whole
        entry["seconds"] = round(entry["seconds"], 1)
    return list(entries.values())


def _first_failure(entry: dict[str, Any]) -> str:
    if "error" in entry:
        lines = [line.strip() for line in entry.get("detail", "").splitlines() if line.strip()]
        return f"not checked: {lines[-1]}" if lines else f"not checked: {entry['error']}"
    for stage in entry["stages"]:
        if stage["status"] in ("fail", "cpu-fails"):
            where = stage.get("model_line") or stage.get("innermost") or ""
            return f"{stage['stage']}: {stage['error']}" + (f" at `{where}`" if where else "")
    return ""


MARK = {"pass": "ok", "fail": "FAIL", "cpu-fails": "CPU too", "skipped": "-"}


def row(entry: dict[str, Any]) -> dict[str, Any]:
    """The table's row for one checked architecture: its cells as :func:`read_table` reads them back."""
    stages = {s["stage"]: s["status"] for s in entry.get("stages", [])}
    failure = _first_failure(entry)
    known = CAUSES.get(entry["model_type"])
    if failure and known and known[0] in failure:
        failure += f". Cause: {known[1]}"
    return {
        "model_type": entry["model_type"],
        "class": entry["class"],
        "cells": [MARK.get(stages.get(s, ""), "error") for s in STAGES],
        "seconds": float(entry["seconds"]),
        "failure": " ".join(line.strip() for line in failure.splitlines()).replace("|", "\\|"),  # one line
    }


def read_table(text: str) -> dict[str, dict[str, Any]]:
    """The rows of a table :func:`table` wrote, by model type (as :func:`row` gives them)."""
    rows = {}
    lines: list[str] = []
    for line in text.splitlines():  # a failure of several lines (older tables) is joined into its row
        if line.startswith("| ") and not line.startswith("| model_type "):
            lines.append(line)
        elif lines and line.strip() and not line.startswith("|"):
            lines[-1] += " " + line.strip()
    for line in lines:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        model_type, cls, *stages, seconds, failure = cells
        rows[model_type] = {
            "model_type": model_type,
            "class": cls,
            "cells": stages,
            "seconds": float(seconds),
            "failure": failure,
        }
    return rows


def table(rows: dict[str, dict[str, Any]], total: int) -> str:
    """docs/architectures.md from its rows: the totals are counted from the cells."""
    lines_out = []
    passed = cpu_too = device_only = unchecked = 0
    for model_type in sorted(rows):
        r = rows[model_type]
        cells = r["cells"]
        if r["failure"].startswith("not checked"):
            unchecked += 1
        elif all(c == "ok" for c in cells):
            passed += 1
        elif "FAIL" in cells:
            device_only += 1
        elif "CPU too" in cells:
            cpu_too += 1
        lines_out.append(f"| {model_type} | {r['class']} | {' | '.join(cells)} | {r['seconds']} | {r['failure']} |")
    checked = [r["seconds"] for r in rows.values() if not r["failure"].startswith("not checked")]
    median = statistics.median(checked) if checked else 0.0
    lines = [
        "# Architectures on the simulated Neuron device",
        "",
        "Generated by `python bench/bench_architectures.py` (do not edit by hand): `neuroncompat check` on the default",
        "config of each causal-LM architecture of the installed transformers (a tiny model of the same architecture on the",
        "simulated device with the shim; docs/check.md, `neuroncompat check`). A pass means the architecture's code paths",
        "run on the simulated device (docs/simulator.md says what it imitates and what is unknown); it is not a",
        "measurement on a trn2. A failure names the first error and the model's line where it was raised; `CPU too`",
        "means the same tiny model fails on the CPU, or (at `load`) that the config builds no model in transformers even",
        "at full size, a default config missing a field (no Neuron verdict). A failure may also come from the shrinking (a",
        "size the tiny config left inconsistent, such as a rotary width of the full model): each needs reading before it",
        "is called an architecture's gap on Neuron; `Cause:` says what was found where it was read.",
        "",
        f"**{passed} of {len(rows) - unchecked} architectures checked pass every stage**, {device_only} fail on the "
        f"simulated device only, {cpu_too} fail on the CPU too (no Neuron verdict); {unchecked} more could not be",
        "checked (`not checked`: transformers refuses its own default config, or `check` could not shrink it or load it as",
        f"a causal LM, a limit of the tool; no verdict on the architecture). {len(rows)} of the {total} model types in the installed",
        "transformers' causal-LM mapping were tried; the checks took "
        f"{sum(r['seconds'] for r in rows.values()) / 60:.1f} min in all, 2 at a time on a 2-core machine; one",
        f"architecture's check took {median:.1f} s (median, a fresh process each, column `s`).",
        "",
        "| model_type | class | load | generate | train eager | train compiled | s | first failure |",
        "|---|---|---|---|---|---|---|---|",
        *lines_out,
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated model_types")
    parser.add_argument("--ci-subset", action="store_true", help="the architectures the suite checks (CI_SUBSET)")
    parser.add_argument("--limit", type=int, default=None, help="check at most this many new architectures")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--per-process", type=int, default=1, help="architectures checked in one worker process")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per architecture")
    parser.add_argument("--results", type=Path, default=Path("bench/architectures.json"))
    parser.add_argument("--table", type=Path, default=Path("docs/architectures.md"))
    args = parser.parse_args()

    every = architectures()
    wanted = list(CI_SUBSET) if args.ci_subset else [t for t in args.only.split(",") if t] or list(every)
    results: dict[str, dict[str, Any]] = json.loads(args.results.read_text()) if args.results.is_file() else {}
    todo = [t for t in wanted if t in every and t not in results][: args.limit]
    groups = [todo[i : i + args.per_process] for i in range(0, len(todo), args.per_process)]
    timeout = args.timeout * args.per_process
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        for entries in pool.map(lambda group: check_group(group, every, timeout), groups):
            for entry in entries:
                results[entry["model_type"]] = entry
                print(
                    f"{entry['model_type']:<24} {entry['seconds']:>6} s  {_first_failure(entry) or 'pass'}", flush=True
                )
            args.results.write_text(json.dumps(results, indent=1) + "\n")
    rows = read_table(args.table.read_text()) if args.table.is_file() else {}
    rows.update({t: row(entry) for t, entry in results.items()})
    args.table.write_text(table({t: r for t, r in rows.items() if t in every}, len(every)))


if __name__ == "__main__":
    main()
