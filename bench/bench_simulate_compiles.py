"""Neuron compilations per scenario of the TRL Trainium guide, as ``neuroncompat simulate`` reports them.

The guide's claims: SFT on varied-length data padded to multiples of 128 compiles at most
``max_length / 128`` graphs, one per length without padding; GRPO generating with a static KV
cache decodes in a bounded set of shapes, the dynamic cache in one new shape per token. Each
scenario (``neuroncompat.simulate.scenarios``, the code the tests assert on) runs exactly as a
user would run it:

    neuroncompat simulate --format json -o report.json -- python -m neuroncompat.simulate.scenarios ...

and the table gives, from the JSON report: the distinct shapes at the busiest location (the figure
the guide's claim is about) against what the guide expects there (max_length/128 padded; one per
batch length unpadded, all distinct in these steps; one decode shape with the static cache, one per
generated token after the first with the dynamic one), the distinct compiled graphs and eager
forward shapes of the run, the compile-time estimate at ``--graph-cost`` seconds a graph, and the fix the
report suggests for the location (with ``--max-shapes 2`` so the default 3-step scenarios are
judged). Counts are deterministic; only the wall time depends on the machine.

Run: ``python bench/bench_simulate_compiles.py [--graph-cost 60] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from neuroncompat.simulate import scenarios
from neuroncompat.testing import build_causal_lm

SCENARIOS: list[tuple[str, list[str], int]] = [
    # (label, scenario arguments, the shapes the guide expects at the busiest location)
    ("SFT pad_to_multiple_of=128", ["sft", "--pad-to-multiple-of", "128"], scenarios.SFT_MAX_LENGTH // 128),
    ("SFT pad_to_multiple_of=None", ["sft", "--pad-to-multiple-of", "none"], scenarios.SFT_STEPS),
    ("GRPO static cache", ["grpo", "--cache", "static"], 1),
    ("GRPO dynamic cache", ["grpo", "--cache", "dynamic"], scenarios.GRPO_COMPLETION_LENGTH - 1),
]


def _busiest(rank: dict[str, Any]) -> tuple[int, str]:
    """The most shapes one location compiled (graphs or eager forward shapes), and its kind."""
    counts = [(len(group["graphs"]), "graphs") for group in rank["compiled"]]
    counts += [(len(entry["shapes"]), "eager shapes") for entry in rank["eager"]]
    return max(counts, default=(0, "-"))


def run(label: str, arguments: list[str], expected: int, model: Path, graph_cost: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        output = Path(scratch) / "report.json"
        command = [
            sys.executable,
            "-c",
            "from neuroncompat.cli import main; main()",
            "simulate",
            "--format",
            "json",
            "-o",
            str(output),
            "--graph-cost",
            str(graph_cost),
            "--max-shapes",
            "2",
            "--",
            sys.executable,
            "-m",
            "neuroncompat.simulate.scenarios",
            "--model",
            str(model),
            *arguments,
        ]
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if result.returncode != 0:
            raise RuntimeError(f"{label} failed:\n{result.stderr[-3000:]}")
        report = json.loads(output.read_text())
    (rank,) = report["ranks"]
    busiest, kind = _busiest(rank)
    fixes = sorted({fix["id"] for warning in rank["warnings"] for fix in warning["fixes"]})
    return {
        "scenario": label,
        "busiest_location": busiest,
        "kind": kind,
        "expected": expected,
        "compiled_graphs": rank["compiled_graphs"],
        "eager_shapes": rank["eager_shapes"],
        "estimated_compile_seconds": rank["estimated_compile_seconds"],
        "fixes": fixes,
        "wall_seconds": round(wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph-cost", type=float, default=60.0)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", TOKENIZERS_PARALLELISM="false")
    with tempfile.TemporaryDirectory() as scratch:
        model = build_causal_lm(Path(scratch) / "tiny-qwen3")
        rows = [run(label, arguments, expected, model, options.graph_cost) for label, arguments, expected in SCENARIOS]
    if options.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"tiny qwen3 (2 layers, hidden 64); SFT: {scenarios.SFT_STEPS} steps, batch 2, max_length {scenarios.SFT_MAX_LENGTH}, "
        f"torch_compile; GRPO: {scenarios.GRPO_STEPS} steps, {scenarios.GRPO_COMPLETION_LENGTH} tokens per completion"
    )
    print(
        f"{'scenario':<29}{'busiest location':>18}{'expected':>10}{'graphs':>8}{'eager':>7}{'est. compile':>14}{'wall s':>8}  fix suggested"
    )
    for row in rows:
        estimate = f"{row['estimated_compile_seconds'] / 60:.0f} min"
        busiest = f"{row['busiest_location']} {row['kind']}"
        print(
            f"{row['scenario']:<29}{busiest:>18}{row['expected']:>10}{row['compiled_graphs']:>8}{row['eager_shapes']:>7}"
            f"{estimate:>14}{row['wall_seconds']:>8}  {', '.join(row['fixes']) or '-'}"
        )


if __name__ == "__main__":
    main()
